// What a training run asks of the engine. Defaults follow DeepSpeed's.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "optimizers/loss_scaler.h"

namespace zero {

// Where the owned model states live (DeepSpeed's offload_optimizer /
// offload_param): kOptimizer keeps fp32 master weights, optimizer state and
// reduced gradients in pinned host memory and steps on the CPU; kParameters
// (stage 3) also keeps the parameter pieces on the host between fetches.
enum class Offload { kNone, kOptimizer, kParameters };

// Where offloaded master weights and optimizer state live (DeepSpeed's
// offload_optimizer.device): pinned host memory, or a file per rank on local
// NVMe streamed chunk by chunk through bounded staging (ZeRO-Infinity).
enum class OffloadDevice { kCpu, kNvme };

struct EngineConfig {
  // 0: data parallel (all-reduce); 1: + optimizer state sharded; 2: +
  // gradients sharded; 3: + parameters sharded.
  int stage = 0;
  // Micro-batches per optimizer step.
  int gradient_accumulation_steps = 1;
  // The step's gradient is the mean of its micro-batches' (true: each
  // micro-batch's loss is a mean, as in a plain loop) or their sum (false:
  // the caller already divided each micro-batch's loss by their count, as
  // transformers.Trainer does; DeepSpeed's scale_wrt_gas=False).
  bool average_micro_batches = true;
  // Elements per reduction bucket (DeepSpeed's reduce_bucket_size, 5e8).
  // Parameters are grouped into units of about this size, in order; a unit
  // is reduced as soon as backward has produced all of its gradients.
  size_t bucket_elements = 500'000'000;
  // Clip gradients to this global L2 norm (of the averaged gradient); 0: off.
  double max_grad_norm = 0.0;
  // Model parameter and gradient dtype. With bf16 or fp16 the engine keeps
  // fp32 master weights of the owned pieces and reduces in fp32.
  DType param_dtype = DType::kF32;
  // bf16/fp16 gradients are widened to fp32 for reduction this many
  // elements at a time (a communication buffer of 4x this many bytes).
  size_t reduce_chunk_elements = size_t{1} << 25;
  // Dynamic loss scaling (always on for fp16, never otherwise): the loss is
  // multiplied by Engine::loss_scale() before backward; a step whose
  // gradients overflow on any rank is skipped by every rank.
  LossScalerConfig loss_scaler;
  Offload offload = Offload::kNone;
  // Pinned host bytes the offload engine may use (0: as much as it needs).
  size_t host_capacity = 0;
  OffloadDevice offload_device = OffloadDevice::kCpu;
  // With kNvme: the folder for each rank's state file (DeepSpeed's
  // nvme_path), and the elements per chunk of the streamed step
  // (StateFile::kStagingBuffers staging buffers of (1 + optimizer states) x
  // 4 bytes x this: 5 x 24 MiB with Adam; less when no unit's piece is as long).
  std::string nvme_path;
  size_t nvme_chunk_elements = size_t{1} << 21;
  // With offload, step each unit on the CPU as soon as its gradients of
  // the step's last micro-batch are reduced, overlapping the rest of
  // backward (off when clipping or loss scaling need every gradient first).
  bool offload_overlap = true;
  // Collectives run on a communication stream of the engine's own, so a
  // unit's reduce-scatter overlaps the backward of the units before it and
  // stage 3's gathers (and the all-gather after a step) overlap forward
  // (DeepSpeed's overlap_comm). Off: everything on the compute stream, in
  // the order it was issued (the serialized baseline of engine_bench).
  bool overlap_comm = true;

  // Stage 3 (DeepSpeed's stage3_* knobs, in elements):
  // how far ahead of the module in use to gather, following the order
  // recorded in the first step: the elements of the units ahead, gathered
  // or not, up to which the prefetch looks (stage3_prefetch_bucket_size);
  // a unit it finds gathered stays until that use;
  size_t prefetch_elements = 50'000'000;
  // a cap on gathered elements alive at once that prefetch respects
  // (stage3_max_live_parameters);
  size_t max_live_elements = 1'000'000'000;
  // a released module whose next fetch comes within this many fetches stays
  // gathered (stage3_max_reuse_distance, counted in fetches here);
  int max_reuse_distance = 0;
  // units of at most this many elements stay gathered for good (DeepSpeed's
  // stage3_param_persistence_threshold, numel <= threshold; 0: none).
  size_t persistence_threshold = 100'000;

  // Communication that sends fewer bytes (DeepSpeed ZeRO++;
  // zero/comm/quantized_collectives.h). Bits per element of stage 3's
  // parameter gathers (zero_quantized_weights: 8; 4 too), 0: off. Units
  // kept gathered for good (persistence_threshold) travel unquantized.
  int quantized_weights_bits = 0;
  // Bits per element of the gradients' reduce-scatter at stages 1-3
  // (zero_quantized_gradients: 4; 8 too), 0: off.
  int quantized_gradients_bits = 0;
  // Hybrid sharding (FSDP2's HSDP, DeepSpeed's mics_shard_size): the model
  // states are sharded inside groups of this many ranks and replicated
  // across the groups; gradients are reduce-scattered inside the group,
  // then all-reduced across the replicas. The ranks per node of a
  // hierarchical communicator (Communicator::levels); 0: the whole world.
  int shard_group_size = 0;
  // hpZ (DeepSpeed's zero_hpz_partition_size): at stage 3, after a unit's
  // first gather in a step each rank keeps 1/this of it, so the unit's later
  // gathers in the step (backward's) run inside the node from these
  // secondary pieces. The ranks per node of a hierarchical communicator
  // (Communicator::levels); 0 or 1: off.
  int hpz_partition_size = 0;
  // Elements per quantization scale.
  size_t quantization_block = 512;
  // Stochastic rounding (seeded by the reduction's number: reruns repeat)
  // instead of to nearest, ties to even.
  bool stochastic_rounding = false;
  // Each rank keeps what its quantized gradients lost and adds it back at
  // the next step: an fp32 copy of the unsharded gradients per rank.
  bool error_feedback = false;
};

absl::Status ValidateConfig(const EngineConfig& config);

}  // namespace zero
