// Save (checkpoint.h): rank 0 makes a fresh step folder, every rank streams
// its data file into it, the ranks all-gather their outcomes and chunk
// checksums, and rank 0 writes the manifest and repoints `latest`.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"
#include "zero/checkpoint/internal/chunk_plan.h"
#include "base/crc32c.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/checkpoint/internal/owned_state_io.h"

namespace zero::checkpoint {
namespace {

struct WrittenFile {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  std::vector<uint32_t> chunk_crcs;  // in plan order
};

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

// Streams this rank's pieces to its data file, one unit's piece at a time.
absl::StatusOr<WrittenFile> WriteDataFile(const Participant& p, const std::string& folder,
                                          const DataFilePlan& plan) {
  const Layout& layout = p.engine.layout();
  const int rank = p.comm.rank(), world = p.comm.world_size(), buffers = BufferCount(p);
  ASSIGN_OR_RETURN(AtomicFileWriter writer,
                   AtomicFileWriter::Open(absl::StrCat(folder, "/", DataFileName(rank, world))));
  const DataFileHeader header{.version = kFormatVersion,
                              .rank = static_cast<uint32_t>(rank),
                              .world_size = static_cast<uint32_t>(world),
                              .model_fingerprint = ModelFingerprint(layout)};
  const std::string header_bytes = EncodeDataHeader(header);
  RETURN_IF_ERROR(writer.Append(header_bytes.data(), header_bytes.size()));
  WrittenFile out;
  std::vector<float> host;
  int unit = -1;
  for (const PlannedChunk& c : plan.chunks) {
    const Unit& u = layout.units()[c.unit];
    if (c.unit != unit) {
      unit = c.unit;
      host.resize(buffers * u.shard);
      RETURN_IF_ERROR(CopyUnitToHost(p.engine, unit, host.data(), u.shard));
    }
    const float* data = host.data() + c.buffer * u.shard + (c.shard_index - u.shard_offset);
    const size_t bytes = (c.end - c.begin) * sizeof(float);
    out.chunk_crcs.push_back(Crc32c(data, bytes));
    RETURN_IF_ERROR(writer.Append(data, bytes, out.chunk_crcs.back()));
  }
  if (writer.bytes() != plan.bytes) {
    return absl::InternalError(
        absl::StrFormat("wrote %d bytes, planned %d", writer.bytes(), plan.bytes));
  }
  out.bytes = writer.bytes();
  out.crc32c = writer.crc32c();
  RETURN_IF_ERROR(writer.Commit());
  return out;
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
  std::memcpy(p + kRecordHead - Agreement::kStatusBytes, written->chunk_crcs.data(),
              written->chunk_crcs.size() * sizeof(uint32_t));
  return record;
}

Manifest BuildManifest(const Participant& p, const std::vector<DataFilePlan>& plans,
                       std::string_view records, size_t chunk_elements) {
  const Engine& engine = p.engine;
  const Engine::ResumePoint point = engine.resume_point();
  Manifest m;
  m.optimizer = std::string(p.optimizer.name());
  m.state_buffers = p.optimizer.state_buffers();
  m.param_dtype = engine.config().param_dtype;
  m.steps = point.steps;
  m.loss_scaler = point.loss_scaler;
  m.world_size = p.comm.world_size();
  m.stage = engine.config().stage;
  m.chunk_elements = chunk_elements;
  for (const ParamSlot& slot : engine.layout().params()) {
    m.params.push_back({slot.name, slot.numel, {}});
  }
  const size_t stride = records.size() / plans.size();
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

// Rank 0, once every data file is in place: the manifest, then `latest`.
absl::Status Publish(const Manifest& manifest, const std::string& root, const std::string& name) {
  const std::string folder = absl::StrCat(root, "/", name);
  RETURN_IF_ERROR(WriteWholeFileAtomically(absl::StrCat(folder, "/", kManifestName),
                                           SerializeManifest(manifest)));
  return PointLatestAt(root, name);
}

}  // namespace

absl::StatusOr<std::string> Save(const Participant& p, const std::string& root,
                                 const SaveOptions& options) {
  RETURN_IF_ERROR(CheckParticipant(p));
  if (options.chunk_elements == 0) return absl::InvalidArgumentError("chunk_elements is 0");
  const int world = p.comm.world_size(), rank = p.comm.rank();
  Agreement agree = AgreementFor(p);
  ASSIGN_OR_RETURN(std::string name, AgreeOnFolder(agree, root, p.engine.resume_point().steps));
  const std::string folder = absl::StrCat(root, "/", name);
  std::vector<DataFilePlan> plans;
  size_t max_chunks = 0;
  for (int r = 0; r < world; ++r) {
    plans.push_back(PlanDataFile(p.engine.layout(), r, BufferCount(p), options.chunk_elements,
                                 kDataHeaderBytes));
    max_chunks = std::max(max_chunks, plans.back().chunks.size());
  }
  const absl::StatusOr<WrittenFile> written = WriteDataFile(p, folder, plans[rank]);
  const std::string record = Record(written, max_chunks);
  ASSIGN_OR_RETURN(std::string records, agree.AllGather(record));
  absl::Status status = Agreement::FirstError(records, record.size(), world);
  if (status.ok()) {
    absl::Status published = absl::OkStatus();
    if (rank == 0) {
      published = Publish(BuildManifest(p, plans, records, options.chunk_elements), root, name);
    }
    status = agree.AllOk(published);
  }
  if (!status.ok()) {
    // A save that failed only after `latest` named it (its folder's fsync)
    // is complete: removing it would leave `latest` naming nothing.
    if (rank == 0 && !LatestNames(root, name)) RemoveFailedSave(folder, world);
    return absl::Status(status.code(),
                        absl::StrCat("saving a checkpoint in '", folder, "': ", status.message()));
  }
  return folder;
}

}  // namespace zero::checkpoint
