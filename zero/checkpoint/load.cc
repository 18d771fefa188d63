// Load (checkpoint.h): every rank reads the manifest and plans bounded reads
// of the chunks that overlap its own pieces (internal/load_plan.h). Pass 1
// streams them and checks every checksum, the ranks agree that all of them
// succeeded, and only then pass 2 places them into the engine (first those
// still in the staging, then the rest, read and checked again), each unit
// rebuilt by OwnedStateAccess::RestoreUnit as soon as it is whole.
#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"
#include "zero/checkpoint/internal/chunk_stream.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/load_plan.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/checkpoint/internal/owned_state_io.h"
#include "zero/checkpoint/internal/piece_placer.h"

namespace zero::checkpoint {
namespace {

// The checkpoint this rank reads and how. Not movable: the stream points
// into the manifest and the plan.
struct Source {
  std::string folder;
  Manifest manifest;
  LoadPlan plan;
  std::optional<ChunkStream> stream;
};

// Rank 0 resolves `path` (its `latest`) and every rank loads the folder it
// found: ranks that each read `latest` could load two checkpoints (another
// job saving into the root meanwhile, or a client's stale cache) and every
// check would pass. What crosses is the part after `path`: "" or "/step-N".
absl::StatusOr<std::string> AgreeOnCheckpoint(Agreement& agree, const std::string& path) {
  constexpr size_t kMaxSuffix = Agreement::kMaxRootBytes - Agreement::kStatusBytes;
  std::string value;
  if (agree.rank() == 0) {
    absl::StatusOr<std::string> folder = ResolveCheckpoint(path);
    if (folder.ok() && folder->size() - path.size() > kMaxSuffix) {
      folder = absl::InvalidArgumentError(absl::StrCat("'", path, "/latest' names a folder of over ",
                                                       kMaxSuffix, " characters"));
    }
    value = Agreement::EncodeStatus(folder.status()) +
            (folder.ok() ? folder->substr(path.size()) : "");
  }
  ASSIGN_OR_RETURN(std::string shared, agree.FromRoot(value));
  RETURN_IF_ERROR(Agreement::DecodeStatus(shared, 0));
  return path + shared.substr(Agreement::kStatusBytes);
}

absl::StatusOr<std::unique_ptr<Source>> OpenSource(const Participant& p, std::string folder,
                                                   const LoadOptions& options) {
  auto source = std::make_unique<Source>();
  source->folder = std::move(folder);
  const std::string manifest_path = absl::StrCat(source->folder, "/", kManifestName);
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(manifest_path));
  ASSIGN_OR_RETURN(source->manifest, ParseManifest(text, manifest_path));
  const Layout& layout = p.engine.layout();
  RETURN_IF_ERROR(CheckMatches(source->manifest, layout, p.optimizer.name(),
                               p.optimizer.state_buffers(), source->folder));
  ASSIGN_OR_RETURN(source->plan, PlanLoad(source->manifest, layout, FileRank(p),
                                          options.staging_bytes, options.read_bytes,
                                          options.reads_in_flight));
  // One pass keeps nothing for a second: the reads in flight and as many
  // again being placed are all the staging it can use, and fresh pages cost
  // (faulting in 256 MiB took longer than reading it on the test VM).
  if (!options.verify_before_placing) {
    source->plan.slots = std::min(source->plan.slots, 2 * source->plan.in_flight);
  }
  ASSIGN_OR_RETURN(ChunkStream stream,
                   ChunkStream::Open(source->folder, source->manifest, source->plan, p.devices));
  source->stream.emplace(std::move(stream));
  return source;
}

// Pass 1: every chunk read and checked, nothing kept.
absl::Status Verify(const absl::StatusOr<std::unique_ptr<Source>>& source) {
  if (!source.ok()) return source.status();
  return (*source)->stream->Run(
      [](const ChunkRead&, const std::byte*) { return absl::OkStatus(); });
}

// Pass 2: every chunk's overlap with this rank's pieces copied in, the
// padding zeroed as the engine keeps it (internal/piece_placer.h); each
// read's copies are done before its buffer is reused. Each unit is rebuilt
// (OwnedStateAccess::RestoreUnit: its gathers) as soon as its piece is whole, in unit
// order as on every rank, so the gathers run while the next reads arrive
// instead of after the last. A rank whose placing fails still rebuilds
// every unit, since its peers wait for it in those gathers, and then
// returns the failure for the ranks to agree on.
absl::Status PlaceAndRestore(const Participant& rank, Source& source) {
  PiecePlacer placer(rank.engine, FileRank(rank), BufferCount(rank), source.plan);
  int restored = 0;
  absl::Status gathered;  // a failed gather failed the group: nothing to keep in step with
  auto restore_placed = [&](int through) {
    for (; gathered.ok() && restored < through; ++restored) {
      gathered = rank.engine.owned_state().RestoreUnit(restored);
    }
    return gathered;
  };
  absl::Status placed =
      source.stream->Run([&](const ChunkRead& read, const std::byte* span) -> absl::Status {
        RETURN_IF_ERROR(placer.Place(read, span));
        return restore_placed(placer.units_placed());
      });
  if (placed.ok()) placed = placer.Finish();
  if (absl::Status s = restore_placed(static_cast<int>(rank.engine.layout().units().size()));
      !s.ok()) {
    // The group failed; the copies placed on the stream still read staging
    // buffers that are freed when this returns.
    (void)rank.engine.stream()->Synchronize();
    return s;
  }
  RETURN_IF_ERROR(rank.engine.owned_state().EndRestore());  // waits for the stream
  return placed;
}

// The loss-scaler state means something only between fp16 runs; an fp16
// engine resumed from another dtype keeps its own schedule.
ResumePoint PointFor(const Manifest& m, const Engine& engine) {
  ResumePoint point;
  point.steps = m.steps;
  if (engine.config().param_dtype != DType::kF16) return point;
  point.loss_scaler = m.param_dtype == DType::kF16 && m.loss_scaler
                          ? m.loss_scaler
                          : engine.owned_state().resume_point().loss_scaler;
  return point;
}

}  // namespace

absl::Status Load(const Participant& p, const std::string& path, const LoadOptions& options) {
  auto context = [&](const absl::Status& s, const char* extra = "") {
    return absl::Status(s.code(),
                        absl::StrCat("loading checkpoint '", path, "': ", s.message(), extra));
  };
  if (absl::Status s = CheckParticipant(p); !s.ok()) return context(s);
  Agreement agree = AgreementFor(p);
  absl::StatusOr<std::string> folder = AgreeOnCheckpoint(agree, path);
  if (!folder.ok()) return context(folder.status());
  absl::StatusOr<std::unique_ptr<Source>> source = OpenSource(p, *std::move(folder), options);
  if (!options.verify_before_placing) {
    // Still nothing placed unless every rank has its files open and checked.
    if (absl::Status s = agree.AllOk(source.status()); !s.ok()) return context(s);
  } else if (absl::Status s = agree.AllOk(Verify(source)); !s.ok()) {
    return context(s);
  }
  const ResumePoint point = PointFor((*source)->manifest, p.engine);
  if (absl::Status s = agree.AllOk(p.engine.owned_state().CheckResumePoint(point)); !s.ok()) return context(s);
  // Checked on every rank: this fails only with the group (communication).
  if (absl::Status s = p.engine.owned_state().BeginRestore(point); !s.ok()) return context(s);
  if (absl::Status s = agree.AllOk(PlaceAndRestore(p, **source)); !s.ok()) {
    return context(s, options.verify_before_placing
                          ? " (after every rank had verified the whole checkpoint: the files "
                            "changed underneath or the copy failed; the engines' states are now "
                            "partly overwritten: load again)"
                          : " (verify_before_placing is off: the engines' states are now partly "
                            "overwritten)");
  }
  if (options.stats != nullptr) {
    const ChunkStream& stream = *(*source)->stream;
    *options.stats = {stream.peak_staging_bytes(), stream.bytes_read(), stream.direct()};
  }
  return absl::OkStatus();
}

}  // namespace zero::checkpoint
