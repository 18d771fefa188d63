#include "zero/config_json.h"

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/json.h"
#include "base/status_macros.h"

namespace zero {
namespace {

using json::Value;

// One known key of an object and how to read its value; `where` names the
// value in messages ("config.loss_scaler.hysteresis").
struct Field {
  std::string_view key;
  std::function<absl::Status(const Value& v, const std::string& where)> read;
};

absl::Status ReadObject(const Value& object, const std::string& where,
                        const std::vector<Field>& fields) {
  if (object.kind != Value::Kind::kObject) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d:%d: '%s' is not an object", object.pos.line, object.pos.column, where));
  }
  for (size_t i = 0; i < object.members.size(); ++i) {
    const auto& [key, value] = object.members[i];
    const Field* field = nullptr;
    for (const Field& f : fields) {
      if (f.key == key) field = &f;
    }
    if (field == nullptr) {
      std::vector<std::string> known;
      for (const Field& f : fields) known.emplace_back(f.key);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%d:%d: unknown key '%s' in '%s' (known: %s)", object.key_pos[i].line,
          object.key_pos[i].column, key, where, absl::StrJoin(known, ", ")));
    }
    RETURN_IF_ERROR(field->read(value, absl::StrCat(where, ".", key)));
  }
  return absl::OkStatus();
}

absl::Status OutOfRange(const Value& v, const std::string& where, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%d:%d: '%s' %s", v.pos.line, v.pos.column, where, what));
}

template <class T>
Field Uint(std::string_view key, T* out) {
  return {key, [out](const Value& v, const std::string& where) -> absl::Status {
            ASSIGN_OR_RETURN(uint64_t u, json::AsUint(v, where));
            if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
              return OutOfRange(v, where, "is too large");
            }
            *out = static_cast<T>(u);
            return absl::OkStatus();
          }};
}

Field Double(std::string_view key, double* out) {
  return {key, [out](const Value& v, const std::string& where) -> absl::Status {
            ASSIGN_OR_RETURN(*out, json::AsDouble(v, where));
            return absl::OkStatus();
          }};
}

Field Bool(std::string_view key, bool* out) {
  return {key, [out](const Value& v, const std::string& where) -> absl::Status {
            if (v.kind != Value::Kind::kBool) return OutOfRange(v, where, "is not true or false");
            *out = v.boolean;
            return absl::OkStatus();
          }};
}

Field String(std::string_view key, std::string* out) {
  return {key, [out](const Value& v, const std::string& where) -> absl::Status {
            ASSIGN_OR_RETURN(*out, json::AsString(v, where));
            return absl::OkStatus();
          }};
}

// A string that must be one of `names`; *out gets its index.
template <class E>
Field Choice(std::string_view key, std::vector<std::pair<std::string_view, E>> names, E* out) {
  return {key, [names, out](const Value& v, const std::string& where) -> absl::Status {
            ASSIGN_OR_RETURN(std::string s, json::AsString(v, where));
            std::vector<std::string> known;
            for (const auto& [name, value] : names) {
              if (name == s) {
                *out = value;
                return absl::OkStatus();
              }
              known.emplace_back(name);
            }
            return OutOfRange(v, where, absl::StrFormat("is '%s', not one of %s", s,
                                                        absl::StrJoin(known, ", ")));
          }};
}

Field Betas(AdamConfig* adam) {
  return {"betas", [adam](const Value& v, const std::string& where) -> absl::Status {
            ASSIGN_OR_RETURN(const std::vector<Value>* items, json::AsArray(v, where));
            if (items->size() != 2) return OutOfRange(v, where, "does not hold two numbers");
            ASSIGN_OR_RETURN(adam->beta1, json::AsDouble((*items)[0], where + "[0]"));
            ASSIGN_OR_RETURN(adam->beta2, json::AsDouble((*items)[1], where + "[1]"));
            return absl::OkStatus();
          }};
}

absl::Status ReadGroup(OptimizerGroups& groups, const Value& v, const std::string& where) {
  if (groups.kind == OptimizerGroups::Kind::kSgd) {
    SgdConfig& c = groups.sgd.emplace_back();
    return ReadObject(v, where,
                      {Double("lr", &c.lr), Double("momentum", &c.momentum),
                       Double("dampening", &c.dampening),
                       Double("weight_decay", &c.weight_decay), Bool("nesterov", &c.nesterov),
                       Bool("maximize", &c.maximize)});
  }
  const bool adamw = groups.kind == OptimizerGroups::Kind::kAdamW;
  AdamConfig& c = groups.adam.emplace_back(adamw ? AdamWDefaults() : AdamConfig{});
  return ReadObject(v, where,
                    {Double("lr", &c.lr), Betas(&c), Double("eps", &c.eps),
                     Double("weight_decay", &c.weight_decay), Bool("maximize", &c.maximize)});
}

// The groups are read after the whole object: their defaults depend on "type".
absl::Status ReadOptimizer(OptimizerGroups& groups, const Value& v, const std::string& where) {
  using Kind = OptimizerGroups::Kind;
  const Value* groups_value = nullptr;
  RETURN_IF_ERROR(ReadObject(
      v, where,
      {Choice<Kind>("type", {{"adam", Kind::kAdam}, {"adamw", Kind::kAdamW}, {"sgd", Kind::kSgd}},
                    &groups.kind),
       {"groups", [&](const Value& g, const std::string&) {
          groups_value = &g;
          return absl::OkStatus();
        }}}));
  if (v.Find("type") == nullptr) return OutOfRange(v, where, "has no 'type'");
  if (groups_value == nullptr) return OutOfRange(v, where, "has no 'groups'");
  const std::string groups_where = where + ".groups";
  ASSIGN_OR_RETURN(const std::vector<Value>* items, json::AsArray(*groups_value, groups_where));
  if (items->empty()) return OutOfRange(*groups_value, groups_where, "is empty");
  for (size_t i = 0; i < items->size(); ++i) {
    RETURN_IF_ERROR(ReadGroup(groups, (*items)[i], absl::StrFormat("%s[%d]", groups_where, i)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EngineSetup> ParseEngineSetup(std::string_view text) {
  ASSIGN_OR_RETURN(Value doc, json::Parse(text));
  EngineSetup setup;
  EngineConfig& c = setup.config;
  LossScalerConfig& ls = c.loss_scaler;
  bool has_optimizer = false;
  RETURN_IF_ERROR(ReadObject(
      doc, "config",
      {Uint("stage", &c.stage), Uint("gradient_accumulation_steps", &c.gradient_accumulation_steps),
       Bool("average_micro_batches", &c.average_micro_batches),
       Uint("bucket_elements", &c.bucket_elements), Double("max_grad_norm", &c.max_grad_norm),
       Choice<DType>("param_dtype",
                     {{"f32", DType::kF32}, {"bf16", DType::kBF16}, {"f16", DType::kF16}},
                     &c.param_dtype),
       Uint("reduce_chunk_elements", &c.reduce_chunk_elements),
       {"loss_scaler",
        [&ls](const Value& v, const std::string& where) {
          return ReadObject(
              v, where,
              {Double("initial_scale", &ls.initial_scale),
               Double("growth_factor", &ls.growth_factor),
               Double("backoff_factor", &ls.backoff_factor),
               Uint("growth_interval", &ls.growth_interval), Uint("hysteresis", &ls.hysteresis),
               Double("min_scale", &ls.min_scale),
               Bool("consecutive_hysteresis", &ls.consecutive_hysteresis),
               Bool("raise_error_at_min_scale", &ls.raise_error_at_min_scale)});
        }},
       Choice<Offload>("offload",
                       {{"none", Offload::kNone},
                        {"optimizer", Offload::kOptimizer},
                        {"parameters", Offload::kParameters}},
                       &c.offload),
       Choice<OffloadDevice>("offload_device",
                             {{"cpu", OffloadDevice::kCpu}, {"nvme", OffloadDevice::kNvme}},
                             &c.offload_device),
       String("nvme_path", &c.nvme_path), Uint("nvme_chunk_elements", &c.nvme_chunk_elements),
       Uint("host_capacity", &c.host_capacity), Bool("offload_overlap", &c.offload_overlap),
       Bool("overlap_comm", &c.overlap_comm),
       Uint("prefetch_elements", &c.prefetch_elements),
       Uint("max_live_elements", &c.max_live_elements),
       Uint("max_reuse_distance", &c.max_reuse_distance),
       Uint("persistence_threshold", &c.persistence_threshold),
       Uint("quantized_weights_bits", &c.quantized_weights_bits),
       Uint("quantized_gradients_bits", &c.quantized_gradients_bits),
       Uint("quantization_block", &c.quantization_block),
       Uint("hpz_partition_size", &c.hpz_partition_size),
       Uint("shard_group_size", &c.shard_group_size),
       Bool("stochastic_rounding", &c.stochastic_rounding),
       Bool("error_feedback", &c.error_feedback),
       {"optimizer", [&](const Value& v, const std::string& where) {
          has_optimizer = true;
          return ReadOptimizer(setup.optimizer, v, where);
        }}}));
  if (!has_optimizer) return OutOfRange(doc, "config", "has no 'optimizer'");
  RETURN_IF_ERROR(ValidateConfig(c));
  for (int g = 0; g < setup.optimizer.size(); ++g) {
    RETURN_IF_ERROR(Annotate(setup.optimizer.Make(g).status(),
                             absl::StrFormat("config.optimizer.groups[%d]", g)));
  }
  return setup;
}

}  // namespace zero
