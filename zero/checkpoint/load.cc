// Load (checkpoint.h): every rank reads the manifest and the chunks that
// overlap its own pieces into host staging, the ranks agree that all of
// them succeeded, and only then does each overwrite its engine's owned
// state and call Engine::Restore.
#include <algorithm>
#include <optional>
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
#include "zero/checkpoint/internal/verified_reader.h"

namespace zero::checkpoint {
namespace {

struct Staged {
  Manifest manifest;
  std::vector<float> values;  // buffer b at b * shard_numel, in this rank's shard order
};

// Copies the part of chunk `c` (of parameter `param`) that lies in `run`.
absl::Status StageChunk(VerifiedReader& reader, const ParamRecord& param, const ChunkRecord& c,
                        const OwnedRun& run, float* buffer_base) {
  ASSIGN_OR_RETURN(std::span<const float> data, reader.Read(param, c));
  const uint64_t lo = std::max<uint64_t>(c.begin, run.begin);
  const uint64_t hi = std::min<uint64_t>(c.end, run.end);
  std::copy(data.begin() + (lo - c.begin), data.begin() + (hi - c.begin),
            buffer_base + run.shard_index + (lo - run.begin));
  return absl::OkStatus();
}

// Reads every chunk overlapping this rank's runs into staging.
absl::Status StageRuns(const Participant& p, VerifiedReader& reader, Staged& staged) {
  const Layout& layout = p.engine.layout();
  const size_t shard = layout.shard_numel();
  staged.values.assign(BufferCount(p) * shard, 0.0f);  // padding stays zero, as the engine keeps it
  for (const OwnedRun& run : OwnedRuns(layout, p.comm.rank())) {
    const ParamRecord& param = staged.manifest.params[run.param];
    for (int b = 0; b < BufferCount(p); ++b) {
      // Chunks are sorted by (buffer, begin): the first that ends past run.begin.
      auto it =
          std::partition_point(param.chunks.begin(), param.chunks.end(), [&](const ChunkRecord& c) {
            return c.buffer < b || (c.buffer == b && c.end <= run.begin);
          });
      for (; it != param.chunks.end() && it->buffer == b && it->begin < run.end; ++it) {
        RETURN_IF_ERROR(StageChunk(reader, param, *it, run, staged.values.data() + b * shard));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Staged> ReadCheckpoint(const Participant& p, const std::string& path) {
  ASSIGN_OR_RETURN(std::string folder, ResolveCheckpoint(path));
  const std::string manifest_path = absl::StrCat(folder, "/", kManifestName);
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(manifest_path));
  Staged staged;
  ASSIGN_OR_RETURN(staged.manifest, ParseManifest(text, manifest_path));
  RETURN_IF_ERROR(CheckMatches(staged.manifest, p.engine.layout(), p.optimizer.name(),
                               p.optimizer.state_buffers(), folder));
  VerifiedReader reader(folder, staged.manifest);
  RETURN_IF_ERROR(StageRuns(p, reader, staged));
  return staged;
}

absl::Status CopyIntoEngine(Engine& engine, const std::vector<float>& values) {
  const Layout& layout = engine.layout();
  for (int u = 0; u < static_cast<int>(layout.units().size()); ++u) {
    const float* host = values.data() + layout.units()[u].shard_offset;
    RETURN_IF_ERROR(CopyUnitFromHost(engine, u, host, layout.shard_numel()));
  }
  return absl::OkStatus();
}

// The loss-scaler state means something only between fp16 runs; an fp16
// engine resumed from another dtype keeps its own schedule.
Engine::ResumePoint PointFor(const Manifest& m, const Engine& engine) {
  Engine::ResumePoint point;
  point.steps = m.steps;
  if (engine.config().param_dtype != DType::kF16) return point;
  point.loss_scaler = m.param_dtype == DType::kF16 && m.loss_scaler
                          ? m.loss_scaler
                          : engine.resume_point().loss_scaler;
  return point;
}

}  // namespace

absl::Status Load(const Participant& p, const std::string& path) {
  auto context = [&](const absl::Status& s, const char* extra = "") {
    return absl::Status(s.code(),
                        absl::StrCat("loading checkpoint '", path, "': ", s.message(), extra));
  };
  if (absl::Status s = CheckParticipant(p); !s.ok()) return context(s);
  Agreement agree = AgreementFor(p);
  absl::StatusOr<Staged> staged = ReadCheckpoint(p, path);
  if (absl::Status s = agree.AllOk(staged.status()); !s.ok()) return context(s);
  if (absl::Status s = agree.AllOk(CopyIntoEngine(p.engine, staged->values)); !s.ok()) {
    return context(s, " (the engines' states are now partly overwritten: load again)");
  }
  if (absl::Status s = p.engine.Restore(PointFor(staged->manifest, p.engine)); !s.ok()) {
    return context(s);
  }
  return absl::OkStatus();
}

}  // namespace zero::checkpoint
