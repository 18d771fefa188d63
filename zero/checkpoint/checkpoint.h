// Checkpoints of a ZeRO engine (zero/engine.h) that load into any number of
// ranks, at any stage, and that a failed save or a damaged file can never
// turn into silently wrong training.
//
//   Save(rank, "/ckpt")  ->  /ckpt/step-120/{manifest, rank-0000r-of-0000N.bin}, /ckpt/latest
//   Load(rank, "/ckpt")  (any world size; or the step folder itself)
//
// What is saved: for every parameter, its fp32 master weights and each
// optimizer state buffer, addressed by parameter name and element range
// (padding never), plus the step count and the fp16 loss-scaler state.
// Each rank writes one data file of the pieces it owns, streaming through a
// host buffer of one piece (unit shard) at a time, with a CRC-32C per chunk
// (internal/chunk_plan.h); rank 0 writes the manifest (internal/manifest.h)
// once every rank's file is durably in place, then repoints `latest`
// (internal/checkpoint_dir.h). Only this header and consolidate.h are the
// layer's interface; internal/ is its detail.
// Not saved: hyper-parameters (learning rate, betas: the caller's config and
// schedule), gradients in flight (call Save between Steps), data-loader
// position.
//
// Load reads, on each rank, the manifest and only the chunks that overlap
// the pieces this rank owns in its own layout. A chunk that straddles a
// piece boundary of the new layout is read and verified whole, then only
// the overlap is used: chunks are at most SaveOptions::chunk_elements long
// and never span two parameters, so each is read at most once per rank.
// Everything is staged in host memory (one shard per rank) and every rank
// must have read and verified all of it before any rank overwrites its
// engine: a missing, truncated or corrupted file, or a checkpoint of another
// model or optimizer, is an error on every rank (naming the file and the
// fault) that leaves every engine exactly as it was.
//
// Mixed precision: masters and state are fp32 whatever config().param_dtype
// is, so a checkpoint loads across param dtypes (e.g. an fp32 run resumed in
// bf16); the model-dtype copies are rebuilt from the masters by
// Engine::Restore. The loss-scaler state travels only from fp16 to fp16;
// otherwise an fp16 engine keeps its own.
//
// Assumes every rank sees the same folder (a shared file system, as
// DeepSpeed and torch.distributed.checkpoint do).
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "optimizers/optimizer.h"
#include "zero/comm/communicator.h"
#include "zero/engine.h"

namespace zero::checkpoint {

// One rank's engine and what it was created with. The engine does not
// expose its optimizer (whose name the manifest records and Load checks) or
// its pool (where the bookkeeping collectives get their device buffers), so
// the caller passes them.
struct Participant {
  Engine& engine;
  const Optimizer& optimizer;  // the one `engine` wraps
  Communicator& comm;          // the one `engine` uses
  DeviceSystem& devices;       // the one `engine` lives on
};

struct SaveOptions {
  // Longest chunk (per CRC) in elements: bounds what a load reads beyond its
  // pieces and what the consolidation tool holds at once (4 MiB).
  size_t chunk_elements = size_t{1} << 20;
};

// Collective: every rank calls it with the same `root`, between Steps.
// Returns the checkpoint folder written. On error (the same on every rank)
// `latest` still names the previous checkpoint, intact.
absl::StatusOr<std::string> Save(const Participant& rank, const std::string& root,
                                 const SaveOptions& options = {});

// Collective: every rank calls it with the same `path` (a root with
// `latest`, or a step folder). On success the engine resumes exactly where
// the checkpoint was taken (Engine::Restore); on error nothing has changed.
absl::Status Load(const Participant& rank, const std::string& path);

}  // namespace zero::checkpoint
