#include "zero/config.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace zero {

absl::Status ValidateConfig(const EngineConfig& config) {
  if (config.stage < 0 || config.stage > 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("stage %d is not 0, 1, 2 or 3", config.stage));
  }
  if (config.gradient_accumulation_steps < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gradient_accumulation_steps %d < 1", config.gradient_accumulation_steps));
  }
  if (config.bucket_elements == 0) return absl::InvalidArgumentError("bucket_elements is zero");
  if (config.reduce_chunk_elements == 0) {
    return absl::InvalidArgumentError("reduce_chunk_elements is zero");
  }
  if (!IsValid(config.param_dtype)) {
    return absl::InvalidArgumentError("param_dtype is not f32, bf16 or f16");
  }
  if (config.offload == Offload::kParameters && config.stage != 3) {
    return absl::InvalidArgumentError("parameter offload needs stage 3");
  }
  if (config.offload != Offload::kNone && config.stage == 0) {
    return absl::InvalidArgumentError("offload needs stage 1, 2 or 3 (it moves the owned pieces)");
  }
  if (config.offload_device == OffloadDevice::kNvme &&
      (config.offload == Offload::kNone || config.nvme_path.empty() ||
       config.nvme_chunk_elements == 0)) {
    return absl::InvalidArgumentError(
        "offload_device nvme needs offload (optimizer or parameters), an nvme_path and "
        "nvme_chunk_elements > 0");
  }
  if (!(config.max_grad_norm >= 0.0)) {
    return absl::InvalidArgumentError("max_grad_norm must be >= 0");
  }
  if (config.max_reuse_distance < 0) {
    return absl::InvalidArgumentError("max_reuse_distance < 0");
  }
  for (const auto& [name, bits] : {std::pair{"quantized_weights_bits", config.quantized_weights_bits},
                                   std::pair{"quantized_gradients_bits",
                                             config.quantized_gradients_bits}}) {
    if (bits != 0 && bits != 4 && bits != 8) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s is %d: 0 (off), 4 or 8", name, bits));
    }
  }
  if (config.quantized_weights_bits != 0 && config.stage != 3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "quantized weights need stage 3 (they quantize its parameter gathers); stage is %d",
        config.stage));
  }
  if (config.quantized_gradients_bits != 0 && config.stage == 0) {
    return absl::InvalidArgumentError(
        "quantized gradients need stage 1, 2 or 3 (they quantize the reduce-scatter)");
  }
  if (config.hpz_partition_size < 0 || (config.hpz_partition_size > 1 && config.stage != 3)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "hpz_partition_size %d: hpZ keeps a node's partition of stage 3's parameters (stage is "
        "%d)",
        config.hpz_partition_size, config.stage));
  }
  if (config.shard_group_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shard_group_size %d < 0", config.shard_group_size));
  }
  if (config.quantization_block == 0 || config.quantization_block % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "quantization_block is %d: a positive even number", config.quantization_block));
  }
  if (config.error_feedback && config.quantized_gradients_bits == 0) {
    return absl::InvalidArgumentError("error_feedback needs quantized gradients");
  }
  return absl::OkStatus();
}

}  // namespace zero
