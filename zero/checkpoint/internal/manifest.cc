#include "zero/checkpoint/internal/manifest.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/crc32c.h"
#include "base/fingerprint.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/data_file.h"

namespace zero::checkpoint {
namespace {

constexpr char kHeaderWord[] = "zero-checkpoint-manifest";

void AppendScaler(std::string& out, const std::optional<LossScaler::State>& s) {
  if (!s) {
    out += "null";
    return;
  }
  absl::StrAppendFormat(&out, "{\"scale\": %.17g, \"good_steps\": %d, \"hysteresis_left\": %d}",
                        s->scale, s->good_steps, s->hysteresis_left);
}

void AppendParams(std::string& out, const std::vector<ParamRecord>& params) {
  out += "\"params\": [";
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamRecord& p = params[i];
    absl::StrAppend(&out, i ? ",\n  " : "\n  ", "{\"name\": ", json::Quote(p.name),
                    ", \"numel\": ", p.numel, ", \"chunks\": [");
    for (size_t c = 0; c < p.chunks.size(); ++c) {
      const ChunkRecord& k = p.chunks[c];
      absl::StrAppendFormat(&out,
                            "%s{\"buffer\": %d, \"begin\": %d, \"end\": %d, \"file\": %d, "
                            "\"offset\": %d, \"crc32c\": %d}",
                            c ? ", " : "", k.buffer, k.begin, k.end, k.file, k.offset, k.crc32c);
    }
    out += "]}";
  }
  out += "\n]}\n";
}

std::string ManifestJson(const Manifest& m) {
  std::string out = absl::StrFormat(
      "{\"format\": \"zero-checkpoint\", \"version\": %d,\n\"model_fingerprint\": \"%016x\",\n"
      "\"param_dtype\": %s,\n\"optimizer\": {\"name\": %s, \"state_buffers\": %d},\n"
      "\"buffers\": [",
      kFormatVersion, m.Fingerprint(), json::Quote(Name(m.param_dtype)), json::Quote(m.optimizer),
      m.state_buffers);
  for (int b = 0; b < m.buffers(); ++b)
    absl::StrAppend(&out, b ? ", " : "", "\"", BufferName(b), "\"");
  absl::StrAppendFormat(&out, "],\n\"steps\": %d,\n\"loss_scaler\": ", m.steps);
  AppendScaler(out, m.loss_scaler);
  absl::StrAppendFormat(&out,
                        ",\n\"saved_by\": {\"world_size\": %d, \"stage\": %d},\n"
                        "\"chunk_elements\": %d,\n\"files\": [",
                        m.world_size, m.stage, m.chunk_elements);
  for (size_t f = 0; f < m.files.size(); ++f) {
    absl::StrAppendFormat(&out, "%s{\"name\": %s, \"bytes\": %d, \"crc32c\": %d}",
                          f ? ",\n  " : "\n  ", json::Quote(m.files[f].name), m.files[f].bytes,
                          m.files[f].crc32c);
  }
  out += "],\n";
  AppendParams(out, m.params);
  return out;
}

// ------------------------------------------------------------------ parse

// The JSON after a valid header line; DataLoss when it is cut or altered.
absl::StatusOr<std::string_view> CheckedBody(std::string_view text, const std::string& path) {
  const size_t newline = text.find('\n');
  // Debian's abseil has its own string_view: the split and number parsers take that.
  const absl::string_view line(text.data(), newline == std::string_view::npos ? 0 : newline);
  std::vector<absl::string_view> words = absl::StrSplit(line, ' ');
  uint32_t crc = 0;
  uint64_t bytes = 0;
  const bool ok = words.size() == 4 && words[0] == kHeaderWord &&
                  words[1] == absl::StrCat("v", kFormatVersion) &&
                  absl::ConsumePrefix(&words[2], "crc32c=") &&
                  absl::SimpleHexAtoi(words[2], &crc) && absl::ConsumePrefix(&words[3], "bytes=") &&
                  absl::SimpleAtoi(words[3], &bytes);
  if (!ok && words.size() == 4 && words[0] == kHeaderWord && absl::StartsWith(words[1], "v")) {
    return absl::FailedPreconditionError(
        absl::StrFormat("manifest '%s' is format version %s; this build reads version %d", path,
                        words[1].substr(1), kFormatVersion));
  }
  if (!ok) {
    return absl::DataLossError(
        absl::StrFormat("manifest '%s' does not start with a '%s v%d crc32c=... bytes=...' line",
                        path, kHeaderWord, kFormatVersion));
  }
  const std::string_view body = text.substr(newline + 1);
  if (body.size() != bytes) {
    return absl::DataLossError(absl::StrFormat(
        "manifest '%s' has %d bytes of JSON, its header says %d: truncated or altered", path,
        body.size(), bytes));
  }
  if (Crc32c(body) != crc) {
    return absl::DataLossError(absl::StrFormat(
        "manifest '%s' fails its checksum (crc32c %08x, header says %08x): corrupted", path,
        Crc32c(body), crc));
  }
  return body;
}

absl::StatusOr<std::optional<LossScaler::State>> ParseScaler(const json::Value& v) {
  if (v.kind == json::Value::Kind::kNull) return std::optional<LossScaler::State>();
  LossScaler::State s;
  ASSIGN_OR_RETURN(const json::Value* scale, json::Member(v, "scale", "loss_scaler"));
  ASSIGN_OR_RETURN(s.scale, json::AsDouble(*scale, "loss_scaler.scale"));
  ASSIGN_OR_RETURN(const json::Value* good, json::Member(v, "good_steps", "loss_scaler"));
  ASSIGN_OR_RETURN(s.good_steps, json::AsInt(*good, "loss_scaler.good_steps"));
  ASSIGN_OR_RETURN(const json::Value* hyst, json::Member(v, "hysteresis_left", "loss_scaler"));
  ASSIGN_OR_RETURN(int64_t left, json::AsInt(*hyst, "loss_scaler.hysteresis_left"));
  s.hysteresis_left = static_cast<int>(left);
  return std::optional<LossScaler::State>(s);
}

absl::StatusOr<DType> ParseDType(const json::Value& v) {
  ASSIGN_OR_RETURN(std::string name, json::AsString(v, "param_dtype"));
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (Name(t) == name) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown param_dtype '", name, "'"));
}

// A small integer field of `object` (counts, indices).
absl::StatusOr<int> IntField(const json::Value& object, std::string_view key,
                             const std::string& where) {
  ASSIGN_OR_RETURN(const json::Value* v, json::Member(object, key, where));
  const std::string at = absl::StrFormat("%s.%s", where, key);
  ASSIGN_OR_RETURN(uint64_t u, json::AsUint(*v, at));
  if (u > (1u << 30)) return absl::InvalidArgumentError(absl::StrCat("'", at, "' is too large"));
  return static_cast<int>(u);
}

absl::StatusOr<uint64_t> UintField(const json::Value& object, std::string_view key,
                                   const std::string& where) {
  ASSIGN_OR_RETURN(const json::Value* v, json::Member(object, key, where));
  return json::AsUint(*v, absl::StrFormat("%s.%s", where, key));
}

absl::StatusOr<std::string> StringField(const json::Value& object, std::string_view key,
                                        const std::string& where) {
  ASSIGN_OR_RETURN(const json::Value* v, json::Member(object, key, where));
  return json::AsString(*v, absl::StrFormat("%s.%s", where, key));
}

absl::Status ParseTopLevel(const json::Value& doc, Manifest& m) {
  ASSIGN_OR_RETURN(std::string format, StringField(doc, "format", "manifest"));
  if (format != "zero-checkpoint") {
    return absl::InvalidArgumentError(absl::StrCat("format is '", format, "'"));
  }
  ASSIGN_OR_RETURN(int version, IntField(doc, "version", "manifest"));
  if (version != static_cast<int>(kFormatVersion)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "format version %d; this build reads version %d", version, kFormatVersion));
  }
  ASSIGN_OR_RETURN(const json::Value* dtype, json::Member(doc, "param_dtype", "manifest"));
  ASSIGN_OR_RETURN(m.param_dtype, ParseDType(*dtype));
  ASSIGN_OR_RETURN(const json::Value* opt, json::Member(doc, "optimizer", "manifest"));
  ASSIGN_OR_RETURN(m.optimizer, StringField(*opt, "name", "optimizer"));
  ASSIGN_OR_RETURN(m.state_buffers, IntField(*opt, "state_buffers", "optimizer"));
  ASSIGN_OR_RETURN(const json::Value* steps, json::Member(doc, "steps", "manifest"));
  ASSIGN_OR_RETURN(m.steps, json::AsInt(*steps, "steps"));
  ASSIGN_OR_RETURN(const json::Value* scaler, json::Member(doc, "loss_scaler", "manifest"));
  ASSIGN_OR_RETURN(m.loss_scaler, ParseScaler(*scaler));
  ASSIGN_OR_RETURN(const json::Value* saved_by, json::Member(doc, "saved_by", "manifest"));
  ASSIGN_OR_RETURN(m.world_size, IntField(*saved_by, "world_size", "saved_by"));
  ASSIGN_OR_RETURN(m.stage, IntField(*saved_by, "stage", "saved_by"));
  ASSIGN_OR_RETURN(m.chunk_elements, UintField(doc, "chunk_elements", "manifest"));
  return absl::OkStatus();
}

absl::Status ParseFiles(const json::Value& doc, Manifest& m) {
  ASSIGN_OR_RETURN(const json::Value* files, json::Member(doc, "files", "manifest"));
  ASSIGN_OR_RETURN(const std::vector<json::Value>* items, json::AsArray(*files, "files"));
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string where = absl::StrCat("files[", i, "]");
    FileRecord f;
    ASSIGN_OR_RETURN(f.name, StringField((*items)[i], "name", where));
    ASSIGN_OR_RETURN(f.bytes, UintField((*items)[i], "bytes", where));
    ASSIGN_OR_RETURN(uint64_t crc, UintField((*items)[i], "crc32c", where));
    f.crc32c = static_cast<uint32_t>(crc);
    m.files.push_back(std::move(f));
  }
  return absl::OkStatus();
}

absl::StatusOr<ChunkRecord> ParseChunk(const json::Value& v, const std::string& where) {
  ChunkRecord c;
  ASSIGN_OR_RETURN(c.buffer, IntField(v, "buffer", where));
  ASSIGN_OR_RETURN(c.begin, UintField(v, "begin", where));
  ASSIGN_OR_RETURN(c.end, UintField(v, "end", where));
  ASSIGN_OR_RETURN(c.file, IntField(v, "file", where));
  ASSIGN_OR_RETURN(c.offset, UintField(v, "offset", where));
  ASSIGN_OR_RETURN(uint64_t crc, UintField(v, "crc32c", where));
  c.crc32c = static_cast<uint32_t>(crc);
  return c;
}

absl::Status ParseParams(const json::Value& doc, Manifest& m) {
  ASSIGN_OR_RETURN(const json::Value* params, json::Member(doc, "params", "manifest"));
  ASSIGN_OR_RETURN(const std::vector<json::Value>* items, json::AsArray(*params, "params"));
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string where = absl::StrCat("params[", i, "]");
    ParamRecord p;
    ASSIGN_OR_RETURN(p.name, StringField((*items)[i], "name", where));
    ASSIGN_OR_RETURN(p.numel, UintField((*items)[i], "numel", where));
    ASSIGN_OR_RETURN(const json::Value* chunks, json::Member((*items)[i], "chunks", where));
    ASSIGN_OR_RETURN(const std::vector<json::Value>* list,
                     json::AsArray(*chunks, absl::StrCat(where, ".chunks")));
    for (size_t c = 0; c < list->size(); ++c) {
      ASSIGN_OR_RETURN(ChunkRecord chunk,
                       ParseChunk((*list)[c], absl::StrCat(where, ".chunks[", c, "]")));
      p.chunks.push_back(chunk);
    }
    m.params.push_back(std::move(p));
  }
  return absl::OkStatus();
}

// Every buffer of `p` covered exactly once, in order, each chunk inside its file.
absl::Status CheckChunks(const Manifest& m, const ParamRecord& p) {
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrFormat("parameter '%s': %s", p.name, what));
  };
  int buffer = 0;
  uint64_t covered = 0;  // elements of `buffer` so far
  for (const ChunkRecord& c : p.chunks) {
    if (covered == p.numel && c.buffer == buffer + 1) {  // the next buffer starts
      ++buffer;
      covered = 0;
    }
    if (c.buffer != buffer || c.begin != covered) {
      return bad(covered < p.numel
                     ? absl::StrFormat("%s elements [%d, %d) are in no chunk", BufferName(buffer),
                                       covered, c.buffer == buffer ? c.begin : p.numel)
                     : absl::StrFormat("chunk %s [%d, %d) overlaps another or is out of order",
                                       BufferName(c.buffer), c.begin, c.end));
    }
    if (c.end <= c.begin || c.end > p.numel) {
      return bad(absl::StrFormat("chunk %s [%d, %d) is empty or past the end", BufferName(c.buffer),
                                 c.begin, c.end));
    }
    // Overflow-safe: the sizes come from the file (a crafted chunk of 2^62
    // elements wrapped to 0 bytes and "fit", then sized a 16 EiB read).
    const uint64_t elements = c.end - c.begin;
    const uint64_t bytes = elements * sizeof(float);
    if (c.file < 0 || c.file >= static_cast<int>(m.files.size()) || c.offset < kDataHeaderBytes ||
        elements > m.files[c.file].bytes / sizeof(float) || c.offset > m.files[c.file].bytes ||
        bytes > m.files[c.file].bytes - c.offset) {
      return bad(absl::StrFormat("chunk %s [%d, %d) lies outside its file", BufferName(c.buffer),
                                 c.begin, c.end));
    }
    covered = c.end;
  }
  if (covered != p.numel) {
    return bad(absl::StrFormat("%s elements [%d, %d) are in no chunk", BufferName(buffer), covered,
                               p.numel));
  }
  if (buffer != m.buffers() - 1) return bad(absl::StrCat(BufferName(buffer + 1), " has no chunks"));
  return absl::OkStatus();
}

absl::Status CheckConsistency(const json::Value& doc, const Manifest& m) {
  ASSIGN_OR_RETURN(std::string fingerprint, StringField(doc, "model_fingerprint", "manifest"));
  if (fingerprint != absl::StrFormat("%016x", m.Fingerprint())) {
    return absl::InvalidArgumentError("model_fingerprint does not match the parameters listed");
  }
  if (m.world_size < 1 || m.files.size() != static_cast<size_t>(m.world_size)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d data files for a world size of %d", m.files.size(), m.world_size));
  }
  for (int r = 0; r < m.world_size; ++r) {
    if (m.files[r].name != DataFileName(r, m.world_size)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "files[%d] is '%s', not '%s'", r, m.files[r].name, DataFileName(r, m.world_size)));
    }
  }
  for (const ParamRecord& p : m.params) RETURN_IF_ERROR(CheckChunks(m, p));
  return absl::OkStatus();
}

absl::Status Where(const absl::Status& s, const std::string& path) {
  return absl::Status(s.code(), absl::StrCat("manifest '", path, "': ", s.message()));
}

}  // namespace

std::string BufferName(int b) { return b == 0 ? "master" : absl::StrCat("state", b - 1); }

uint64_t Manifest::Fingerprint() const {
  uint64_t h = kFnvBasis;
  for (const ParamRecord& p : params) h = MixParam(h, p.name, p.numel);
  return h;
}

std::string SerializeManifest(Manifest manifest) {
  for (ParamRecord& p : manifest.params) {
    std::sort(p.chunks.begin(), p.chunks.end(), [](const ChunkRecord& a, const ChunkRecord& b) {
      return std::tie(a.buffer, a.begin) < std::tie(b.buffer, b.begin);
    });
  }
  const std::string body = ManifestJson(manifest);
  return absl::StrFormat("%s v%d crc32c=%08x bytes=%d\n%s", kHeaderWord, kFormatVersion,
                         Crc32c(body), body.size(), body);
}

absl::StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& path) {
  ASSIGN_OR_RETURN(std::string_view body, CheckedBody(text, path));
  absl::StatusOr<json::Value> doc = json::Parse(body);
  if (!doc.ok()) return Where(doc.status(), path);
  Manifest m;
  absl::Status s = ParseTopLevel(*doc, m);
  if (s.ok()) s = ParseFiles(*doc, m);
  if (s.ok()) s = ParseParams(*doc, m);
  if (s.ok()) s = CheckConsistency(*doc, m);
  if (!s.ok()) return Where(s, path);
  return m;
}

absl::Status CheckMatches(const Manifest& m, const Layout& layout, std::string_view optimizer,
                          int state_buffers, const std::string& path) {
  auto mismatch = [&](const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint '", path, "' does not fit this engine: ", what));
  };
  const std::vector<ParamSlot>& params = layout.params();
  for (size_t i = 0; i < std::max(params.size(), m.params.size()); ++i) {
    if (i >= params.size() || i >= m.params.size()) {
      return mismatch(absl::StrFormat("it holds %d parameters, this model has %d", m.params.size(),
                                      params.size()));
    }
    if (params[i].name != m.params[i].name || params[i].numel != m.params[i].numel) {
      return mismatch(absl::StrFormat(
          "parameter #%d is '%s' (%d elements) in the checkpoint, '%s' (%d) in this model", i,
          m.params[i].name, m.params[i].numel, params[i].name, params[i].numel));
    }
  }
  if (m.optimizer != optimizer || m.state_buffers != state_buffers) {
    return mismatch(
        absl::StrFormat("saved with optimizer '%s' (%d state buffers), this engine has '%s' (%d)",
                        m.optimizer, m.state_buffers, optimizer, state_buffers));
  }
  return absl::OkStatus();
}

}  // namespace zero::checkpoint
