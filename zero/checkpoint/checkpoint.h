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
// Each rank writes one data file of the pieces it owns, with a CRC-32C per
// chunk (internal/chunk_plan.h): it snapshots the file's bytes into a
// bounded set of aligned host buffers (SaveOptions::snapshot_bytes) that a
// background thread checksums and writes (O_DIRECT where the filesystem
// allows), so with AsyncSaver training goes on during the copy (until the
// next Step) and the write; rank 0
// writes the manifest (internal/manifest.h) once every rank's file is
// durably in place, then repoints `latest` (internal/checkpoint_dir.h).
// Only this header and consolidate.h are the layer's interface; internal/
// is its detail.
// Not saved: hyper-parameters (learning rate, betas: the caller's config and
// schedule), gradients in flight (call Save between Steps), data-loader
// position.
//
// Load reads, on each rank, the manifest and only the chunks that overlap
// the pieces this rank owns in its own layout. A chunk that straddles a
// piece boundary of the new layout is read and verified whole, then only
// the overlap is used: chunks are at most SaveOptions::chunk_elements long
// and never span two parameters, so each is read at most once per pass.
// It streams in two passes through a bounded host staging area
// (LoadOptions::staging_bytes, whatever the model's size): pass 1 reads and
// checks every chunk, and the ranks agree that all of it is sound; only then
// pass 2 places each chunk into the engine: first those pass 1 left in the
// staging, then the rest, read and checked again (a rank reads its share
// once plus what of it exceeds the staging; once when it fits). So a
// missing, truncated or corrupted file, or a checkpoint of another model or
// optimizer, is an error on every rank (naming the file and the fault)
// that leaves every engine exactly as it was; only a file that changes
// between the passes fails in pass 2, with the engines partly overwritten
// (the error says so: load again).
//
// Mixed precision: masters and state are fp32 whatever config().param_dtype
// is, so a checkpoint loads across param dtypes (e.g. an fp32 run resumed in
// bf16); the model-dtype copies are rebuilt from the masters by
// Engine::Restore. The loss-scaler state travels only from fp16 to fp16;
// otherwise an fp16 engine keeps its own.
//
// Hybrid sharding (EngineConfig::shard_group_size): every replica group
// holds the same shards, so a checkpoint is one group's, written by the
// first group and read by every group; it loads at any layout, like any
// other.
//
// Assumes every rank sees the same folder (a shared file system, as
// DeepSpeed and torch.distributed.checkpoint do).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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
  // Host memory a rank snapshots its state into (aligned buffers, kept by
  // an AsyncSaver across its saves). When the rank's state is larger, the
  // copy of the excess waits for the writer to free buffers, and the next
  // Step for that copy: training then waits for about the excess's write,
  // and the writer runs beside the whole step (measured: a step slowed by
  // 0.13-0.81 of a Save, against 0.12-0.23 with the whole state in
  // buffers reserved at setup: AsyncSaver::Reserve). Save, which waits for
  // the whole write anyway, takes at most 8 write_bytes of it.
  size_t snapshot_bytes = size_t{256} << 20;
  // Bytes per write and per snapshot buffer (rounded up to 4 KiB).
  size_t write_bytes = size_t{8} << 20;
  // An AsyncSaver's save is published as soon as every rank's file is
  // written, not at Wait: each rank's background thread leaves its outcome
  // and checksums beside its data file (rank-*.record), and rank 0's
  // gathers them from the folder, writes the manifest and repoints `latest`
  // (so the folder must be one every rank sees, as always). Wait then only
  // agrees on the outcome. For snapshots taken every step: training never
  // waits for a write, and a state is published tens of milliseconds after
  // its step instead of at the next Wait. Rank 0's thread gives up on
  // ranks whose record has not come within publish_timeout.
  bool publish_when_written = false;
  absl::Duration publish_timeout = absl::Minutes(5);
};

// Collective: every rank calls it with the same `root`, between Steps.
// Returns the checkpoint folder written. On error (the same on every rank)
// `latest` still names the previous checkpoint, intact. Start + Wait of an
// AsyncSaver.
absl::StatusOr<std::string> Save(const Participant& rank, const std::string& root,
                                 const SaveOptions& options = {});

class SnapshotWriter;
class Agreement;
struct DataFilePlan;
struct WrittenFile;

// Saves that let training go on while the data files are written. One per
// rank, on the rank's training thread (not thread-safe). Start and Wait are
// collectives, called by every rank in the same order: the ranks agree
// (on the folder at Start, on every rank's outcome at Wait) on the training
// thread, never on the background writer, so the communicator is only ever
// used by the thread that trains. Hence a save is published (its manifest
// written, `latest` repointed) only at Wait: call it, or the next Start,
// before relying on the checkpoint (unless SaveOptions::publish_when_written,
// which publishes through the folder instead). Each saver takes a copy
// stream of the rank's device, which the DeviceSystem keeps for its life:
// keep one saver per rank, not one per save.
class AsyncSaver {
 public:
  AsyncSaver(const Participant& rank, const SaveOptions& options = {});
  // Waits for the background write but publishes nothing: an unpublished
  // save is a folder without a manifest, never loaded; `latest` unchanged
  // (with publish_when_written, a save whose files were all written may
  // have been published already; rank 0 stops waiting for the rest).
  ~AsyncSaver();

  // Waits for the previous save (returning its error, if any, instead of
  // starting), creates the step folder and returns, while a thread copies
  // this rank's owned state into the snapshot on a stream of its own: what
  // is written is the state at Start. Forward and backward go on meanwhile;
  // the engine's next change to owned state (Step's update, offload_overlap's
  // early updates, SetParam, a Load) waits for the copy
  // (OwnedStateAccess::Guard; EngineStats::owned_state_wait_seconds), and so
  // does the copy of whatever exceeds snapshot_bytes for the write of the
  // rest. Change parameters only through the engine meanwhile (not through
  // param() at stage 0-2). With the state on NVMe, Start itself copies
  // (only the training thread streams the state file). The background write
  // starts when the copy is done (or when the buffers are full). Start's
  // errors are the same on every rank; later failures surface at Wait.
  absl::Status Start(const std::string& root);
  // Waits until every rank's file is durable, then rank 0 publishes.
  // Returns the checkpoint folder, or the save's error (the same on every
  // rank; `latest` still names the previous checkpoint).
  absl::StatusOr<std::string> Wait();
  bool pending() const { return pending_; }

  // Optional, at setup, on this rank alone (not a collective): allocates and
  // faults in now the snapshot buffers a Start takes (what this rank owns,
  // at most snapshot_bytes), which a first Start would otherwise do while
  // training waits (1.2 GB took 3.3 times a whole Save on the test VM). A
  // later Start reuses them. Not while a save is pending.
  absl::Status Reserve();
  size_t snapshot_buffer_bytes() const;  // host memory held for snapshots

 private:
  friend absl::StatusOr<std::string> Save(const Participant&, const std::string&,
                                          const SaveOptions&);
  const Participant rank_;
  const SaveOptions options_;
  std::unique_ptr<SnapshotWriter> writer_;
  bool pending_ = false;
  // Save's own saver: the write overlaps the snapshot (nothing trains
  // meanwhile); an AsyncSaver's write starts after a snapshot that fits.
  bool synchronous_ = false;
  // publish_when_written: this rank's record written after its file, and
  // on rank 0 the manifest once every record is there; publisher_ runs it.
  bool PublishesWhenWritten() const;
  absl::Status PublishWhenWritten();
  absl::Status GatherRecords(std::string& records, size_t record_bytes) const;
  absl::StatusOr<absl::Status> GatherAndPublish(Agreement& agree);
  // Rank 0: the manifest of `plans` from the records (`stride` bytes
  // apart, file ranks first), then `latest`.
  absl::Status Publish(const std::vector<DataFilePlan>& plans, std::string_view records,
                       size_t stride) const;
  // This rank's file as written (joins the writer), or an empty one for a
  // rank that writes none (hybrid sharding's other replica groups).
  absl::StatusOr<WrittenFile> Written();

  // The save in flight: where, and the engine's resume point at Start.
  std::string root_, name_;
  ResumePoint point_;
  std::thread publisher_;
  absl::Status published_;         // publisher_'s outcome, read after joining it
  std::atomic<bool> stopping_{false};  // the destructor: rank 0 stops waiting
};

// What a Load did, for benchmarks and tests.
struct LoadStats {
  uint64_t peak_staging_bytes = 0;  // host memory the reads were staged in
  uint64_t bytes_read = 0;          // both passes
  bool direct = false;              // O_DIRECT on every file read
};

struct LoadOptions {
  // Host memory each rank stages file data in: it must hold one chunk of
  // the checkpoint (SaveOptions::chunk_elements floats, 4 KiB aligned).
  size_t staging_bytes = size_t{256} << 20;
  // Reads of at most read_bytes (staging_bytes / reads_in_flight if less;
  // more when one chunk needs more), at most reads_in_flight at once: small
  // reads queued a few at a time arrive one after another, so the first are
  // placed while the disk reads the next; the staging past them keeps pass
  // 1's last reads, verified, for pass 2.
  size_t read_bytes = size_t{16} << 20;
  int reads_in_flight = 4;
  // Off: one pass that checks and places each chunk, so the files are read
  // once (staging at most 2 x reads_in_flight reads of the budget), but a
  // missing or corrupted chunk fails the load with the engines partly
  // overwritten (the error says so).
  bool verify_before_placing = true;
  LoadStats* stats = nullptr;  // filled when set and the load succeeds
};

// Collective: every rank calls it with the same `path` (a root with
// `latest`, or a step folder). On success the engine resumes exactly where
// the checkpoint was taken (OwnedStateAccess::BeginRestore, then RestoreUnit as each
// unit is placed, so its gathers overlap the next reads, then EndRestore;
// a rank whose placing fails still takes part in every unit's gathers, so
// its peers never wait for it); on error nothing has changed
// (but see above: a file changed during the load).
absl::Status Load(const Participant& rank, const std::string& path,
                  const LoadOptions& options = {});

}  // namespace zero::checkpoint
