#include "bench/footprint/options.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/footprint/names.h"
#include "bench/footprint/presets.h"
#include "memory/status_macros.h"
#include "memory/units.h"

namespace zero::footprint {
namespace {

absl::Status Bad(const std::string& option, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("--%s: %s", option, what));
}

// "500000000", "5e8", "1.5e9": a whole number below 2^53.
absl::StatusOr<uint64_t> WholeNumber(const std::string& option, const std::string& text) {
  uint64_t value = 0;
  if (absl::SimpleAtoi(text, &value) && !absl::StartsWith(text, "+")) return value;
  const bool scientific = !text.empty() && text[0] >= '0' && text[0] <= '9' &&
                          text.find_first_of("eE") != std::string::npos;
  char* end = nullptr;
  const double d = scientific ? std::strtod(text.c_str(), &end) : -1;
  if (!scientific || end != text.c_str() + text.size() || !(d >= 0) || d >= 9007199254740992.0 ||
      d != std::floor(d)) {
    return Bad(option, absl::StrFormat("'%s' is not a whole number (e.g. 500000000 or 5e8)", text));
  }
  return static_cast<uint64_t>(d);
}

absl::StatusOr<std::vector<std::string>> List(const std::string& option, const std::string& text) {
  std::vector<std::string> items = absl::StrSplit(text, ',');
  for (const std::string& item : items) {
    if (item.empty()) return Bad(option, absl::StrFormat("empty item in the list '%s'", text));
  }
  return items;
}

template <typename T>
absl::Status ParseList(const std::string& option, const std::string& text, std::vector<T>* out,
                       const std::function<absl::StatusOr<T>(const std::string&)>& one) {
  ASSIGN_OR_RETURN(std::vector<std::string> items, List(option, text));
  out->clear();
  for (const std::string& item : items) {
    ASSIGN_OR_RETURN(T value, one(item));
    out->push_back(value);
  }
  return absl::OkStatus();
}

template <typename T>
std::function<absl::StatusOr<T>(const std::string&)> Word(
    const std::string& option, std::optional<T> (*parse)(std::string_view), const char* choices) {
  return [=](const std::string& item) -> absl::StatusOr<T> {
    std::optional<T> value = parse(item);
    if (!value.has_value()) return Bad(option, absl::StrFormat("'%s' is not %s", item, choices));
    return *value;
  };
}

absl::StatusOr<int> Ranks(const std::string& item) {
  int n = 0;
  if (!absl::SimpleAtoi(item, &n) || n < 1 || n > (1 << 24)) {
    return Bad("ranks", absl::StrFormat("'%s' is not a number of ranks from 1 to 16777216", item));
  }
  return n;
}

absl::StatusOr<int> Stage(const std::string& item) {
  int s = -1;
  if (!absl::SimpleAtoi(item, &s) || s < 0 || s > 3) {
    return Bad("stage", absl::StrFormat("'%s' is not 0, 1, 2 or 3", item));
  }
  return s;
}

using Setter = std::function<absl::Status(Options&, const std::string&)>;

Setter Elements(size_t Knobs::*field, const char* option) {
  return [=](Options& o, const std::string& v) -> absl::Status {
    ASSIGN_OR_RETURN(uint64_t n, WholeNumber(option, v));
    o.knobs.*field = n;
    return absl::OkStatus();
  };
}

Setter Count(int Knobs::*field, const char* option, int max) {
  return [=](Options& o, const std::string& v) -> absl::Status {
    ASSIGN_OR_RETURN(uint64_t n, WholeNumber(option, v));
    if (n < 1 || n > static_cast<uint64_t>(max)) {
      return Bad(option, absl::StrFormat("%s is not from 1 to %d", v, max));
    }
    o.knobs.*field = static_cast<int>(n);
    return absl::OkStatus();
  };
}

const std::map<std::string, Setter>& Setters() {
  static const auto* setters = new std::map<std::string, Setter>{
      {"model",
       [](Options& o, const std::string& v) {
         return ParseList<std::string>("model", v, &o.models,
                                       [](const std::string& s) { return s; });
       }},
      {"ranks", [](Options& o,
                   const std::string& v) { return ParseList<int>("ranks", v, &o.ranks, Ranks); }},
      {"stage", [](Options& o,
                   const std::string& v) { return ParseList<int>("stage", v, &o.stages, Stage); }},
      {"precision",
       [](Options& o, const std::string& v) {
         return ParseList<Precision>(
             "precision", v, &o.precisions,
             Word<Precision>("precision", ParsePrecision, "fp32, bf16 or fp16"));
       }},
      {"optimizer",
       [](Options& o, const std::string& v) {
         return ParseList<OptimizerKind>(
             "optimizer", v, &o.optimizers,
             Word<OptimizerKind>("optimizer", ParseOptimizer, "adam or sgd"));
       }},
      {"offload",
       [](Options& o, const std::string& v) {
         return ParseList<Offload>(
             "offload", v, &o.offloads,
             Word<Offload>("offload", ParseOffload, "none, optimizer or parameters"));
       }},
      {"bucket_elements", Elements(&Knobs::bucket_elements, "bucket_elements")},
      {"prefetch_elements", Elements(&Knobs::prefetch_elements, "prefetch_elements")},
      {"persistence_threshold", Elements(&Knobs::persistence_threshold, "persistence_threshold")},
      {"max_live_elements", Elements(&Knobs::max_live_elements, "max_live_elements")},
      {"steps", Count(&Knobs::steps, "steps", 1000)},
      {"gpus_per_node", Count(&Knobs::gpus_per_node, "gpus_per_node", 1 << 16)},
      {"device_memory",
       [](Options& o, const std::string& v) -> absl::Status {
         absl::StatusOr<size_t> bytes = ParseBytes(v);
         if (!bytes.ok() || *bytes == 0) {
           return Bad("device_memory", absl::StrFormat("'%s' is not a size like 80GB", v));
         }
         o.knobs.device_memory = *bytes;
         return absl::OkStatus();
       }},
      {"json",
       [](Options& o, const std::string& v) {
         o.json_path = v;
         return absl::OkStatus();
       }},
      {"csv",
       [](Options& o, const std::string& v) {
         o.csv_path = v;
         return absl::OkStatus();
       }},
      {"svg",
       [](Options& o, const std::string& v) {
         o.svg_path = v;
         return absl::OkStatus();
       }},
  };
  return *setters;
}

}  // namespace

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h" || arg == "--helpfull") {
      options.help = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unexpected argument '%s' (options look like --name=value; see --help)", arg));
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto setter = Setters().find(name);
    if (setter == Setters().end()) {
      return absl::InvalidArgumentError(absl::StrFormat("unknown option --%s (see --help)", name));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Bad(name, "needs a value");
    }
    RETURN_IF_ERROR(setter->second(options, value));
  }
  return options;
}

std::string Usage() {
  return absl::StrFormat(
      R"(footprint: measured memory and traffic of one rank of a ZeRO job, beside the
ZeRO paper's formulas and DeepSpeed's estimators. The real engine runs one rank
on a meta device (addresses, no bytes) with a communicator that has no peers;
every rank of a ZeRO job holds the same bytes, so one rank stands for all.

usage: bazel run -c opt //bench:footprint -- [options]

Sweeps (comma lists; the runs are the cross product):
  --model=NAME|FILE.json  presets: %s (default zero-7.5b)
  --ranks=N               simulated ranks (default 8,64)
  --stage=S               ZeRO stage 0-3 (default 0,1,2,3)
  --precision=P           fp32, bf16, fp16 (default bf16)
  --optimizer=O           adam (AdamW), sgd (momentum 0.9) (default adam)
  --offload=W             none, optimizer, parameters (default none)
Engine knobs (elements; 5e8 style accepted):
  --bucket_elements (5e8) --prefetch_elements (5e7)
  --persistence_threshold (1e5) --max_live_elements (1e9)
Run and report:
  --steps=N               training steps per run (default 2)
  --device_memory=SIZE    the card to fit in (default 80GB; GB = 1e9 bytes)
  --gpus_per_node=N       for DeepSpeed's estimators (default 8)
  --json=FILE --csv=FILE --svg=FILE   also write these
Exit status: 0 done, 2 bad input or a configuration the engine rejects
(one line on stderr), 1 an output file could not be written.
)",
      absl::StrJoin(PresetNames(), ", "));
}

}  // namespace zero::footprint
