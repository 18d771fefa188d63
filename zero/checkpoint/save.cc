// Save and AsyncSaver (checkpoint.h): rank 0 makes a fresh step folder,
// every rank snapshots its data file and a background thread writes it
// (internal/snapshot_writer.h); at Wait the ranks all-gather their outcomes
// and chunk checksums, and rank 0 writes the manifest and repoints `latest`.
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "base/thread_name.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"
#include "zero/checkpoint/internal/chunk_plan.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/checkpoint/internal/owned_state_io.h"
#include "zero/checkpoint/internal/snapshot_writer.h"

namespace zero::checkpoint {
namespace {

// Rank 0 creates the folder; every rank learns its name or rank 0's error.
absl::StatusOr<std::string> AgreeOnFolder(Agreement& agree, const std::string& root,
                                          int64_t steps) {
  std::string value;
  if (agree.rank() == 0) {
    absl::StatusOr<std::string> name = CreateStepFolder(root, steps);
    value = Agreement::EncodeStatus(name.status()) + (name.ok() ? *name : "");
  }
  ASSIGN_OR_RETURN(std::string shared, agree.FromRoot(value));
  RETURN_IF_ERROR(Agreement::DecodeStatus(shared, 0));
  return shared.substr(Agreement::kStatusBytes);
}

// What each rank sends rank 0: its outcome, file size and checksums, padded
// to the longest plan so that every rank's record has the same size.
constexpr size_t kRecordHead = Agreement::kStatusBytes + 16;

std::string Record(const absl::StatusOr<WrittenFile>& written, size_t max_chunks) {
  std::string record = Agreement::EncodeStatus(written.status());
  record.resize(kRecordHead + max_chunks * sizeof(uint32_t), '\0');
  if (!written.ok()) return record;
  char* p = record.data() + Agreement::kStatusBytes;
  std::memcpy(p, &written->bytes, 8);
  std::memcpy(p + 8, &written->crc32c, 4);
  if (!written->chunk_crcs.empty()) {  // none for a rank that writes no file (hybrid)
    std::memcpy(p + kRecordHead - Agreement::kStatusBytes, written->chunk_crcs.data(),
                written->chunk_crcs.size() * sizeof(uint32_t));
  }
  return record;
}

// `records`: each rank's, `stride` bytes apart, file ranks first (under
// hybrid sharding the other groups' follow, and hold no file).
Manifest BuildManifest(const Participant& p, const ResumePoint& point,
                       const std::vector<DataFilePlan>& plans, std::string_view records,
                       size_t stride, size_t chunk_elements) {
  const Engine& engine = p.engine;
  Manifest m;
  m.optimizer = std::string(p.optimizer.name());
  m.state_buffers = p.optimizer.state_buffers();
  m.param_dtype = engine.config().param_dtype;
  m.steps = point.steps;
  m.loss_scaler = point.loss_scaler;
  m.world_size = FileWorld(p);
  m.stage = engine.config().stage;
  m.chunk_elements = chunk_elements;
  for (const ParamSlot& slot : engine.layout().params()) {
    m.params.push_back({slot.name, slot.numel, {}});
  }
  for (int r = 0; r < static_cast<int>(plans.size()); ++r) {
    const char* rec = records.data() + r * stride + Agreement::kStatusBytes;
    FileRecord file{DataFileName(r, m.world_size), 0, 0};
    std::memcpy(&file.bytes, rec, 8);
    std::memcpy(&file.crc32c, rec + 8, 4);
    m.files.push_back(file);
    const char* crcs = rec + (kRecordHead - Agreement::kStatusBytes);
    for (size_t i = 0; i < plans[r].chunks.size(); ++i) {
      const PlannedChunk& c = plans[r].chunks[i];
      uint32_t crc;
      std::memcpy(&crc, crcs + i * sizeof crc, sizeof crc);
      m.params[c.param].chunks.push_back({c.buffer, c.begin, c.end, r, c.offset, crc});
    }
  }
  return m;
}

std::vector<DataFilePlan> AllPlans(const Participant& p, size_t chunk_elements) {
  std::vector<DataFilePlan> plans;
  for (int r = 0; r < FileWorld(p); ++r) {
    plans.push_back(PlanDataFile(p.engine.layout(), r, BufferCount(p), chunk_elements,
                                 kDataHeaderBytes));
  }
  return plans;
}

size_t MaxChunks(const std::vector<DataFilePlan>& plans) {
  size_t most = 0;
  for (const DataFilePlan& plan : plans) most = std::max(most, plan.chunks.size());
  return most;
}

// publish_when_written: rank r's record, beside its data file.
std::string RecordPath(const std::string& folder, int rank, int world) {
  return absl::StrCat(folder, "/", DataFileName(rank, world), ".record");
}

// Rank 0, once every data file is in place: the manifest, then `latest`.
absl::Status PublishManifest(const Manifest& manifest, const std::string& root,
                             const std::string& name) {
  const std::string folder = absl::StrCat(root, "/", name);
  RETURN_IF_ERROR(WriteWholeFileAtomically(absl::StrCat(folder, "/", kManifestName),
                                           SerializeManifest(manifest)));
  return PointLatestAt(root, name);
}

}  // namespace

absl::StatusOr<std::string> Save(const Participant& p, const std::string& root,
                                 const SaveOptions& options) {
  AsyncSaver saver(p, options);
  saver.synchronous_ = true;
  RETURN_IF_ERROR(saver.Start(root));
  return saver.Wait();
}

AsyncSaver::AsyncSaver(const Participant& rank, const SaveOptions& options)
    : rank_(rank),
      options_(options),
      writer_(std::make_unique<SnapshotWriter>(options.write_bytes, options.snapshot_bytes)) {}

AsyncSaver::~AsyncSaver() {
  stopping_ = true;
  if (publisher_.joinable()) publisher_.join();
}  // then the writer joins its thread

absl::Status AsyncSaver::Start(const std::string& root) {
  if (pending_) RETURN_IF_ERROR(Wait().status());
  RETURN_IF_ERROR(CheckParticipant(rank_));
  if (options_.chunk_elements == 0) return absl::InvalidArgumentError("chunk_elements is 0");
  if (options_.write_bytes == 0 || options_.write_bytes > kMaxWriteBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "write_bytes %d must be from 1 to %d", options_.write_bytes, kMaxWriteBytes));
  }
  const Layout& layout = rank_.engine.layout();
  const int rank = FileRank(rank_), world = FileWorld(rank_);
  Agreement agree = AgreementFor(rank_);
  // Between backward and Step (offload_overlap) the snapshot would be torn
  // yet pass every CRC: refused on every rank.
  RETURN_IF_ERROR(agree.AllOk(rank_.engine.owned_state().Settled("a checkpoint")));
  point_ = rank_.engine.owned_state().resume_point();
  ASSIGN_OR_RETURN(name_, AgreeOnFolder(agree, root, point_.steps));
  root_ = root;
  const DataFileHeader header{.version = kFormatVersion,
                              .rank = static_cast<uint32_t>(rank),
                              .world_size = static_cast<uint32_t>(world),
                              .model_fingerprint = ModelFingerprint(layout)};
  // Save waits for the file anyway; state on NVMe only the training thread
  // may stream. Otherwise training goes on while a thread copies.
  const SnapshotMode mode = synchronous_                       ? SnapshotMode::kOverlap
                            : !rank_.engine.owned_state().nvme_file().empty() ? SnapshotMode::kBlocking
                                                                : SnapshotMode::kBackground;
  pending_ = true;
  published_ = absl::OkStatus();
  if (!WritesFile(rank_)) return absl::OkStatus();  // another replica group's: agreements only
  std::shared_future<void> snapshot = writer_->Start(
      rank_, absl::StrCat(root_, "/", name_, "/", DataFileName(rank, world)),
      EncodeDataHeader(header),
      PlanDataFile(layout, rank, BufferCount(rank_), options_.chunk_elements, kDataHeaderBytes),
      mode);
  if (mode == SnapshotMode::kBackground) rank_.engine.owned_state().Guard(std::move(snapshot));
  if (PublishesWhenWritten()) {
    publisher_ = std::thread([this] {
      NameThisThread("zero-publish");
      published_ = PublishWhenWritten();
    });
  }
  return absl::OkStatus();
}

absl::StatusOr<WrittenFile> AsyncSaver::Written() {
  if (!WritesFile(rank_)) return WrittenFile{};
  return writer_->Finish();
}

bool AsyncSaver::PublishesWhenWritten() const {
  return options_.publish_when_written && !synchronous_;
}

absl::Status AsyncSaver::PublishWhenWritten() {
  const absl::StatusOr<WrittenFile> written = Written();
  const int world = FileWorld(rank_), rank = FileRank(rank_);
  const std::vector<DataFilePlan> plans = AllPlans(rank_, options_.chunk_elements);
  const std::string record = Record(written, MaxChunks(plans));
  const std::string folder = absl::StrCat(root_, "/", name_);
  // Written even for a failed file, so that rank 0 learns why at once.
  RETURN_IF_ERROR(WriteWholeFileAtomically(RecordPath(folder, rank, world), record));
  if (!written.ok()) return written.status();
  if (rank != 0) return absl::OkStatus();
  std::string records;
  RETURN_IF_ERROR(GatherRecords(records, record.size()));
  RETURN_IF_ERROR(Agreement::FirstError(records, record.size(), world));
  return Publish(plans, records, record.size());
}

// Rank 0, from every file rank's record (either way they were gathered).
absl::Status AsyncSaver::Publish(const std::vector<DataFilePlan>& plans, std::string_view records,
                                 size_t stride) const {
  return PublishManifest(
      BuildManifest(rank_, point_, plans, records, stride, options_.chunk_elements), root_, name_);
}

// Rank 0's publisher: every rank's record, as Wait's all-gather would give
// them, read from the folder as each appears (each is renamed into place
// whole, so one that exists is complete).
absl::Status AsyncSaver::GatherRecords(std::string& records, size_t record_bytes) const {
  const int world = FileWorld(rank_);
  const std::string folder = absl::StrCat(root_, "/", name_);
  records.assign(world * record_bytes, '\0');
  std::vector<bool> got(world, false);
  int missing = world;
  const absl::Time deadline = absl::Now() + options_.publish_timeout;
  absl::Duration nap = absl::Microseconds(100);
  while (true) {
    for (int r = 0; r < world; ++r) {
      const std::string path = RecordPath(folder, r, world);
      if (got[r] || !FileExists(path)) continue;
      ASSIGN_OR_RETURN(const std::string record, ReadWholeFile(path));
      if (record.size() != record_bytes) {
        return absl::DataLossError(absl::StrFormat("%s has %d bytes, not %d", path,
                                                   record.size(), record_bytes));
      }
      record.copy(records.data() + r * record_bytes, record_bytes);
      got[r] = true;
      --missing;
    }
    if (missing == 0) return absl::OkStatus();
    if (stopping_) return absl::CancelledError("the saver was destroyed before every file was written");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%d of %d ranks left no record in %s within %s", missing, world, folder,
          absl::FormatDuration(options_.publish_timeout)));
    }
    absl::SleepFor(nap);
    nap = std::min(nap * 2, absl::Milliseconds(2));
  }
}

absl::Status AsyncSaver::Reserve() {
  if (pending_) return absl::FailedPreconditionError("a save is pending: Wait first");
  RETURN_IF_ERROR(CheckParticipant(rank_));
  if (options_.chunk_elements == 0) return absl::InvalidArgumentError("chunk_elements is 0");
  if (!WritesFile(rank_)) return absl::OkStatus();
  const DataFilePlan plan = PlanDataFile(rank_.engine.layout(), FileRank(rank_),
                                         BufferCount(rank_), options_.chunk_elements,
                                         kDataHeaderBytes);
  return writer_->Reserve(rank_.devices, plan.bytes);
}

size_t AsyncSaver::snapshot_buffer_bytes() const { return writer_->buffer_bytes(); }

absl::StatusOr<std::string> AsyncSaver::Wait() {
  if (!pending_) return absl::FailedPreconditionError("no save in flight");
  pending_ = false;
  const int rank = rank_.comm.rank(), world = FileWorld(rank_);
  const std::string folder = absl::StrCat(root_, "/", name_);
  Agreement agree = AgreementFor(rank_);
  absl::Status status;
  if (PublishesWhenWritten()) {
    if (publisher_.joinable()) publisher_.join();  // none on a rank that writes no file
    status = agree.AllOk(published_);
  } else {
    ASSIGN_OR_RETURN(status, GatherAndPublish(agree));
  }
  if (!status.ok()) {
    // A save that failed only after `latest` named it (its folder's fsync)
    // is complete: removing it would leave `latest` naming nothing.
    if (rank == 0 && !LatestNames(root_, name_)) RemoveFailedSave(folder, world);
    return absl::Status(status.code(),
                        absl::StrCat("saving a checkpoint in '", folder, "': ", status.message()));
  }
  return folder;
}

// Wait's all-gather of the outcomes and checksums, then rank 0's publish.
// An error of the agreement itself is the StatusOr's; the save's, its value.
absl::StatusOr<absl::Status> AsyncSaver::GatherAndPublish(Agreement& agree) {
  const absl::StatusOr<WrittenFile> written = Written();
  const std::vector<DataFilePlan> plans = AllPlans(rank_, options_.chunk_elements);
  const std::string record = Record(written, MaxChunks(plans));
  ASSIGN_OR_RETURN(std::string records, agree.AllGather(record));
  absl::Status status = Agreement::FirstError(records, record.size(), rank_.comm.world_size());
  if (!status.ok()) return status;
  absl::Status published = absl::OkStatus();
  if (rank_.comm.rank() == 0) {
    published = Publish(plans, records, record.size());
  }
  return agree.AllOk(published);
}

}  // namespace zero::checkpoint
