#include "footprint/model_json.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "footprint/hf_config.h"

namespace zero::footprint {
namespace {

using json::KindName;
using Kind = json::Value::Kind;
constexpr uint64_t kMaxRepeat = 1'000'000;

// What an entry expands to, counted on the JSON without expanding it, in
// saturating arithmetic. Counting tolerates malformed entries (the loader
// reports them): a bad repeat counts once, a bad list counts nothing.
struct Expansion {
  uint64_t modules = 0, params = 0, name_bytes = 0;
  // The entries with "repeat" along the path that yields the most modules.
  std::vector<const json::Value*> chain;
};

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t SatMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t RepeatOf(const json::Value& entry) {
  const json::Value* r = entry.kind == Kind::kObject ? entry.Find("repeat") : nullptr;
  const std::optional<uint64_t> n = r != nullptr ? r->AsUint() : std::nullopt;
  return n.has_value() && *n >= 1 && *n <= kMaxRepeat ? *n : 1;
}

size_t NameLength(const json::Value& object) {
  const json::Value* name = object.Find("name");
  return name != nullptr && name->kind == Kind::kString ? name->text.size() : 0;
}

const std::vector<json::Value>& ItemsOf(const json::Value* list) {
  static const std::vector<json::Value> kNone;
  return list != nullptr && list->kind == Kind::kArray ? list->items : kNone;
}

// `prefix` bytes precede the entry's name; names get ".i" when repeated.
Expansion Expand(const json::Value& entry, uint64_t prefix) {
  Expansion e;
  if (entry.kind != Kind::kObject) return e;
  const uint64_t repeat = RepeatOf(entry);
  const uint64_t name = prefix + NameLength(entry) +
                        (entry.Find("repeat") ? 1 + absl::StrCat(repeat - 1).size() : 0);
  if (const json::Value* modules = entry.Find("modules")) {
    for (const json::Value& child : ItemsOf(modules)) {
      Expansion c = Expand(child, name + 1);
      if (c.modules > e.modules || e.chain.empty()) e.chain = std::move(c.chain);
      e.modules = SatAdd(e.modules, c.modules);
      e.params = SatAdd(e.params, c.params);
      e.name_bytes = SatAdd(e.name_bytes, c.name_bytes);
    }
  } else {
    e.modules = 1;
    e.name_bytes = name;
    for (const json::Value& p : ItemsOf(entry.Find("params"))) {
      ++e.params;
      e.name_bytes += name + 1 + (p.kind == Kind::kObject ? NameLength(p) : 0);
    }
  }
  if (repeat > 1) e.chain.insert(e.chain.begin(), &entry);
  e.modules = SatMul(e.modules, repeat);
  e.params = SatMul(e.params, repeat);
  e.name_bytes = SatMul(e.name_bytes, repeat);
  return e;
}

class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  absl::StatusOr<ModelSpec> Load(const json::Value& root) {
    RETURN_IF_ERROR(Need(root, Kind::kObject, "the model"));
    RETURN_IF_ERROR(OnlyKeys(root, "the model", {"name", "modules", "forward"}));
    model_.name = file_;
    if (const json::Value* name = root.Find("name")) {
      RETURN_IF_ERROR(Name(*name, "the model's \"name\"", &model_.name));
    }
    const json::Value* modules = root.Find("modules");
    if (modules == nullptr) return ErrorAt(root.pos, "the model has no \"modules\"");
    RETURN_IF_ERROR(Entries(*modules, ""));
    if (const json::Value* forward = root.Find("forward")) RETURN_IF_ERROR(Forward(*forward));
    if (absl::Status s = Validate(model_); !s.ok()) return ErrorAt(root.pos, s.message());
    return std::move(model_);
  }

 private:
  absl::Status ErrorAt(json::Pos pos, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d:%d: %s", file_, pos.line, pos.column, what));
  }
  absl::Status Need(const json::Value& v, Kind kind, const std::string& what) const {
    if (v.kind == kind) return absl::OkStatus();
    return ErrorAt(
        v.pos, absl::StrFormat("%s must be %s, found %s", what, KindName(kind), KindName(v.kind)));
  }
  absl::Status OnlyKeys(const json::Value& object, const std::string& what,
                        std::initializer_list<const char*> keys) const {
    for (size_t i = 0; i < object.members.size(); ++i) {
      const std::string& key = object.members[i].first;
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      if (!known) {
        return ErrorAt(object.key_pos[i], absl::StrFormat("unknown key \"%s\" in %s (expected %s)",
                                                          key, what, absl::StrJoin(keys, ", ")));
      }
    }
    return absl::OkStatus();
  }
  absl::Status Name(const json::Value& v, const std::string& what, std::string* out) const {
    RETURN_IF_ERROR(Need(v, Kind::kString, what));
    if (v.text.empty()) return ErrorAt(v.pos, what + " is empty");
    *out = v.text;
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Count(const json::Value& v, const std::string& what,
                                 uint64_t max) const {
    std::optional<uint64_t> n = v.AsUint();
    if (!n.has_value() || *n < 1 || *n > max) {
      return ErrorAt(
          v.pos, absl::StrFormat("%s must be an integer from 1 to %d, found %s", what, max,
                                 v.kind == Kind::kNumber ? v.text : std::string(KindName(v.kind))));
    }
    return *n;
  }

  absl::Status Entries(const json::Value& list, const std::string& prefix) {
    RETURN_IF_ERROR(Need(list, Kind::kArray, "\"modules\""));
    if (list.items.empty()) return ErrorAt(list.pos, "\"modules\" is empty");
    for (const json::Value& entry : list.items) RETURN_IF_ERROR(Entry(entry, prefix));
    return absl::OkStatus();
  }

  // A module or a group, `repeat` times.
  absl::Status Entry(const json::Value& entry, const std::string& prefix) {
    RETURN_IF_ERROR(Need(entry, Kind::kObject, "a module"));
    const bool group = entry.Find("modules") != nullptr;
    const std::string what = group ? "a group" : "a module";
    RETURN_IF_ERROR(group ? OnlyKeys(entry, what, {"name", "modules", "repeat"})
                          : OnlyKeys(entry, what, {"name", "params", "repeat"}));
    const json::Value* name_value = entry.Find("name");
    if (name_value == nullptr) return ErrorAt(entry.pos, what + " has no \"name\"");
    std::string name;
    RETURN_IF_ERROR(Name(*name_value, "a module's \"name\"", &name));
    uint64_t repeat = 1;
    const json::Value* repeat_value = entry.Find("repeat");
    if (repeat_value != nullptr) {
      ASSIGN_OR_RETURN(repeat, Count(*repeat_value, "\"repeat\"", kMaxRepeat));
      RETURN_IF_ERROR(WithinLimits(entry, prefix.size()));
    }
    for (uint64_t i = 0; i < repeat; ++i) {
      std::string full = prefix + name;
      if (repeat_value != nullptr) full += absl::StrFormat(".%d", i);
      if (group) {
        RETURN_IF_ERROR(Entries(*entry.Find("modules"), full + "."));
      } else {
        RETURN_IF_ERROR(Module(entry, *name_value, full));
      }
    }
    return absl::OkStatus();
  }

  // Refuses, before anything is expanded, an entry that would take the
  // model past a limit, naming the repeats that multiply.
  absl::Status WithinLimits(const json::Value& entry, size_t prefix) {
    const Expansion e = Expand(entry, prefix);
    const struct {
      uint64_t have, adding, limit;
      const char* what;
    } checks[] = {
        {model_.modules.size(), e.modules, kMaxModelModules, "modules"},
        {params_, e.params, kMaxModelParams, "parameters"},
        {name_bytes_, e.name_bytes, kMaxModelNameBytes, "bytes of names"},
    };
    for (const auto& c : checks) {
      if (SatAdd(c.have, c.adding) <= c.limit) continue;
      std::vector<std::string> repeats;
      for (const json::Value* r : e.chain) {
        const json::Value* name = r->Find("name");
        repeats.push_back(absl::StrFormat(
            "\"%s\" repeat %d", name != nullptr ? name->text : std::string("?"), RepeatOf(*r)));
      }
      const json::Value& at = *entry.Find("repeat");
      return ErrorAt(at.pos, absl::StrFormat("%s = %s %s, over the limit of %d %s",
                                             absl::StrJoin(repeats, " x "),
                                             c.adding == UINT64_MAX
                                                 ? std::string("more than 1.8e19")
                                                 : absl::StrFormat("%.3g", double(c.adding)),
                                             c.what, c.limit, c.what));
    }
    return absl::OkStatus();
  }

  absl::Status Module(const json::Value& entry, const json::Value& name_value,
                      const std::string& full) {
    if (!index_.emplace(full, static_cast<int>(model_.modules.size())).second) {
      return ErrorAt(name_value.pos, absl::StrFormat("duplicate module name '%s'", full));
    }
    const json::Value* params = entry.Find("params");
    if (params == nullptr) return ErrorAt(entry.pos, "module '" + full + "' has no \"params\"");
    RETURN_IF_ERROR(Need(*params, Kind::kArray, "\"params\""));
    if (params->items.empty())
      return ErrorAt(params->pos, "module '" + full + "' has no parameters");
    ModuleSpec module{full, {}};
    for (const json::Value& p : params->items) {
      ASSIGN_OR_RETURN(ParamShape shape, Param(p, module));
      module.params.push_back(std::move(shape));
    }
    params_ += module.params.size();
    name_bytes_ += full.size();
    for (const ParamShape& p : module.params) name_bytes_ += full.size() + 1 + p.name.size();
    model_.modules.push_back(std::move(module));
    return absl::OkStatus();
  }

  absl::StatusOr<ParamShape> Param(const json::Value& p, const ModuleSpec& module) const {
    RETURN_IF_ERROR(Need(p, Kind::kObject, "a parameter"));
    RETURN_IF_ERROR(OnlyKeys(p, "a parameter", {"name", "shape"}));
    const json::Value* name = p.Find("name");
    const json::Value* shape = p.Find("shape");
    if (name == nullptr) return ErrorAt(p.pos, "a parameter has no \"name\"");
    if (shape == nullptr) return ErrorAt(p.pos, "a parameter has no \"shape\"");
    ParamShape out;
    RETURN_IF_ERROR(Name(*name, "a parameter's \"name\"", &out.name));
    for (const ParamShape& other : module.params) {
      if (other.name == out.name) {
        return ErrorAt(name->pos, absl::StrFormat("duplicate parameter name '%s' in module '%s'",
                                                  out.name, module.name));
      }
    }
    RETURN_IF_ERROR(Need(*shape, Kind::kArray, "\"shape\""));
    if (shape->items.empty()) return ErrorAt(shape->pos, "\"shape\" has no dimensions");
    for (const json::Value& d : shape->items) {
      ASSIGN_OR_RETURN(uint64_t dim, Count(d, "a dimension", uint64_t{1} << 58));
      out.shape.push_back(dim);
    }
    if (out.numel() > (uint64_t{1} << 58)) return ErrorAt(shape->pos, "more than 2^58 elements");
    return out;
  }

  absl::Status Forward(const json::Value& forward) {
    RETURN_IF_ERROR(Need(forward, Kind::kArray, "\"forward\""));
    if (forward.items.empty()) return ErrorAt(forward.pos, "\"forward\" is empty");
    std::vector<bool> used(model_.modules.size());
    for (const json::Value& use : forward.items) {
      RETURN_IF_ERROR(Need(use, Kind::kString, "a forward use"));
      auto it = index_.find(use.text);
      if (it == index_.end()) {
        return ErrorAt(use.pos, absl::StrFormat("forward uses unknown module '%s'", use.text));
      }
      model_.forward.push_back(it->second);
      used[it->second] = true;
    }
    for (size_t m = 0; m < used.size(); ++m) {
      if (!used[m]) {
        return ErrorAt(forward.pos, absl::StrFormat("module '%s' is never used in \"forward\"",
                                                    model_.modules[m].name));
      }
    }
    return absl::OkStatus();
  }

  const std::string file_;
  ModelSpec model_;
  uint64_t params_ = 0, name_bytes_ = 0;  // of the modules expanded so far
  absl::flat_hash_map<std::string, int> index_;
};

}  // namespace

absl::StatusOr<ModelSpec> ModelFromJson(std::string_view text, const std::string& file) {
  absl::StatusOr<json::Value> root = json::Parse(text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", root.status().message()));
  }
  if (IsHfConfig(*root)) return ModelFromHfConfig(*root, file);
  return Loader(file).Load(*root);
}

absl::StatusOr<ModelSpec> LoadModelFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: is a folder, not a model file (a Hugging Face model: %s/config.json)", path, path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot read the model file: %s", path, std::strerror(errno)));
  }
  // A description so large is a mistake, and would be held whole in memory.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > static_cast<std::streamoff>(kMaxModelFileBytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the model file has %d bytes, over the limit of %d bytes", path,
                        static_cast<int64_t>(size), kMaxModelFileBytes));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ModelFromJson(text.str(), path);
}

}  // namespace zero::footprint
