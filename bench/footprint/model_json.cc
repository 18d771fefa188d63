#include "bench/footprint/model_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "memory/json.h"
#include "memory/status_macros.h"

namespace zero::footprint {
namespace {

using json::KindName;
using Kind = json::Value::Kind;
constexpr uint64_t kMaxRepeat = 1'000'000;

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
      ASSIGN_OR_RETURN(uint64_t dim, Count(d, "a dimension", uint64_t{1} << 62));
      out.shape.push_back(dim);
    }
    if (out.numel() > (uint64_t{1} << 62)) return ErrorAt(shape->pos, "more than 2^62 elements");
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
  absl::flat_hash_map<std::string, int> index_;
};

}  // namespace

absl::StatusOr<ModelSpec> ModelFromJson(std::string_view text, const std::string& file) {
  absl::StatusOr<json::Value> root = json::Parse(text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", root.status().message()));
  }
  return Loader(file).Load(*root);
}

absl::StatusOr<ModelSpec> LoadModelFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: cannot read the model file: %s", path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ModelFromJson(text.str(), path);
}

}  // namespace zero::footprint
