#include "footprint/options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "footprint/flag_help.h"
#include "footprint/names.h"
#include "footprint/presets.h"

// Flag value types. Abseil hands AbslParseFlag the text after '='; the error
// it sets is "what is wrong", which ParseOptions prefixes with "--NAME: ".
// AbslUnparseFlag writes a value back (--help shows defaults with it) so
// that parsing it again gives the same value.
namespace zero::footprint {
namespace {

constexpr double kTwoTo53 = 9007199254740992.0;  // doubles are exact below this

// "500000000", "5e8", "1.5e9": a whole number below 2^53.
struct WholeNumber {
  uint64_t value = 0;
};

bool AbslParseFlag(absl::string_view text, WholeNumber* n, std::string* error) {
  const std::string s(text);
  if (absl::SimpleAtoi(s, &n->value) && !absl::StartsWith(s, "+")) return true;
  const bool scientific =
      !s.empty() && s[0] >= '0' && s[0] <= '9' && s.find_first_of("eE") != std::string::npos;
  char* end = nullptr;
  const double d = scientific ? std::strtod(s.c_str(), &end) : -1;
  if (!scientific || end != s.c_str() + s.size() || !(d >= 0) || d >= kTwoTo53 ||
      d != std::floor(d)) {
    *error = absl::StrFormat("'%s' is not a whole number (e.g. 500000000 or 5e8)", s);
    return false;
  }
  n->value = static_cast<uint64_t>(d);
  return true;
}

// 5e8 rather than 500000000 where that is exact, as people write them.
std::string AbslUnparseFlag(WholeNumber n) {
  int zeros = 0;
  uint64_t mantissa = n.value;
  while (mantissa != 0 && mantissa % 10 == 0) {
    mantissa /= 10;
    ++zeros;
  }
  if (zeros < 3 || n.value >= static_cast<uint64_t>(kTwoTo53)) return absl::StrCat(n.value);
  return absl::StrCat(mantissa, "e", zeros);
}

// A whole number from 1 to kMax.
template <int kMax>
struct Count {
  int value = 1;
};

template <int kMax>
bool AbslParseFlag(absl::string_view text, Count<kMax>* count, std::string* error) {
  WholeNumber n;
  if (!AbslParseFlag(text, &n, error)) return false;
  if (n.value < 1 || n.value > static_cast<uint64_t>(kMax)) {
    *error = absl::StrFormat("%s is not from 1 to %d", text, kMax);
    return false;
  }
  count->value = static_cast<int>(n.value);
  return true;
}

template <int kMax>
std::string AbslUnparseFlag(Count<kMax> count) {
  return absl::StrCat(count.value);
}

// One word of a WordItem (below) rather than a list of them: --offload_device
// (DeepSpeed's offload_optimizer.device), --backend.
template <typename Item>
struct One {
  typename Item::Type value;
};

template <typename Item>
bool AbslParseFlag(absl::string_view text, One<Item>* one, std::string* error) {
  std::optional<typename Item::Type> value = Item::Read(text);
  if (!value.has_value()) {
    *error = absl::StrFormat("'%s' is not %s", text, Item::kWhat);
    return false;
  }
  one->value = *value;
  return true;
}

template <typename Item>
std::string AbslUnparseFlag(const One<Item>& one) { return Item::Write(one.value); }

// "80GB", "80GiB", "4096": a non-zero number of bytes (base/units.h).
struct ByteSize {
  size_t bytes = 0;
};

bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error) {
  absl::StatusOr<size_t> bytes = ParseBytes(std::string_view(text.data(), text.size()));
  if (!bytes.ok() || *bytes == 0) {
    *error = absl::StrFormat("'%s' is not a size like 80GB", text);
    return false;
  }
  size->bytes = *bytes;
  return true;
}

// The largest unit that divides exactly, so the text parses back the same.
std::string AbslUnparseFlag(ByteSize size) {
  static constexpr std::pair<const char*, size_t> kUnits[] = {
      {"TB", 1'000'000'000'000}, {"TiB", size_t{1} << 40}, {"GB", 1'000'000'000},
      {"GiB", size_t{1} << 30},  {"MB", 1'000'000},        {"MiB", size_t{1} << 20},
      {"KB", 1'000},             {"KiB", size_t{1} << 10}};
  for (const auto& [unit, scale] : kUnits) {
    if (size.bytes != 0 && size.bytes % scale == 0) return absl::StrCat(size.bytes / scale, unit);
  }
  return absl::StrCat(size.bytes);
}

// A comma list. `Item` reads one item (Read: nullopt if it is not one),
// says what an item must be (kWhat) and writes one back (Write).
template <typename Item>
struct List {
  std::vector<typename Item::Type> items;
};

template <typename Item>
bool AbslParseFlag(absl::string_view text, List<Item>* list, std::string* error) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ',');
  // Every item is checked for being there before any is read, so "8,,x"
  // names the empty item, as a reader of the list would.
  for (absl::string_view part : parts) {
    if (part.empty()) {
      *error = absl::StrFormat("empty item in the list '%s'", text);
      return false;
    }
  }
  std::vector<typename Item::Type> items;
  for (absl::string_view part : parts) {
    std::optional<typename Item::Type> item = Item::Read(part);
    if (!item.has_value()) {
      *error = absl::StrFormat("'%s' is not %s", part, Item::kWhat);
      return false;
    }
    items.push_back(*std::move(item));
  }
  list->items = std::move(items);
  return true;
}

template <typename Item>
std::string AbslUnparseFlag(const List<Item>& list) {
  std::vector<std::string> parts;
  for (const auto& item : list.items) parts.push_back(Item::Write(item));
  return absl::StrJoin(parts, ",");
}

std::optional<int> IntFrom(absl::string_view text, int min, int max) {
  int n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < min || n > max) return std::nullopt;
  return n;
}

struct ModelItem {
  using Type = std::string;
  static constexpr const char* kWhat = "a model";  // unused: Read takes any name
  static std::optional<Type> Read(absl::string_view text) { return std::string(text); }
  static std::string Write(const Type& name) { return name; }
};

struct RanksItem {
  using Type = int;
  static constexpr const char* kWhat = "a number of ranks from 1 to 16777216";
  static std::optional<Type> Read(absl::string_view text) { return IntFrom(text, 1, 1 << 24); }
  static std::string Write(Type n) { return absl::StrCat(n); }
};

struct StageItem {
  using Type = int;
  static constexpr const char* kWhat = "0, 1, 2 or 3";
  static std::optional<Type> Read(absl::string_view text) { return IntFrom(text, 0, 3); }
  static std::string Write(Type n) { return absl::StrCat(n); }
};

// An enum item, by the words in names.h.
template <typename E, std::optional<E> (*kParse)(std::string_view), const char* kChoices>
struct WordItem {
  using Type = E;
  static constexpr const char* kWhat = kChoices;
  static std::optional<Type> Read(absl::string_view text) {
    return kParse(std::string_view(text.data(), text.size()));
  }
  static std::string Write(Type value) { return std::string(Name(value)); }
};

// A sequence length: 0 (no activations) to 2^20.
struct SeqItem {
  using Type = uint64_t;
  static constexpr const char* kWhat = "a sequence length from 0 (no activations) to 1048576";
  static std::optional<Type> Read(absl::string_view text) {
    std::optional<int> n = IntFrom(text, 0, 1 << 20);
    return n.has_value() ? std::optional<Type>(*n) : std::nullopt;
  }
  static std::string Write(Type n) { return absl::StrCat(n); }
};

struct MicroBatchItem {
  using Type = uint64_t;
  static constexpr const char* kWhat = "a micro-batch size from 1 to 4096";
  static std::optional<Type> Read(absl::string_view text) {
    std::optional<int> n = IntFrom(text, 1, 4096);
    return n.has_value() ? std::optional<Type>(*n) : std::nullopt;
  }
  static std::string Write(Type n) { return absl::StrCat(n); }
};

constexpr char kPrecisions[] = "fp32, bf16 or fp16";
constexpr char kOptimizers[] = "adam or sgd";
using PrecisionItem = WordItem<Precision, ParsePrecision, kPrecisions>;
using OptimizerItem = WordItem<OptimizerKind, ParseOptimizer, kOptimizers>;
// An --offload item: a placement, or nvme, ZeRO-Infinity's shorthand for
// optimizer offload with --offload_device=nvme (as the issue and DeepSpeed
// users say it).
struct OffloadChoice {
  Offload offload = Offload::kNone;
  bool nvme = false;
};
struct OffloadItem {
  using Type = OffloadChoice;
  static constexpr const char* kWhat = "none, optimizer, parameters or nvme";
  static std::optional<Type> Read(absl::string_view text) {
    if (text == "nvme") return Type{Offload::kOptimizer, true};
    std::optional<Offload> offload = ParseOffload(std::string_view(text.data(), text.size()));
    return offload.has_value() ? std::optional<Type>(Type{*offload, false}) : std::nullopt;
  }
  static std::string Write(Type value) {
    return value.nvme ? "nvme" : std::string(Name(value.offload));
  }
};
List<OffloadItem> DefaultOffloads() {
  List<OffloadItem> list;
  for (Offload offload : Options{}.offloads) list.items.push_back({offload, false});
  return list;
}
constexpr char kKernels[] = "fused or transformers";
constexpr char kAttentions[] = "eager, sdpa or flash";
constexpr char kCheckpointings[] = "none, selective or full";
using KernelsItem = WordItem<Kernels, ParseKernels, kKernels>;
using AttentionItem = WordItem<Attention, ParseAttention, kAttentions>;
using CheckpointingItem = WordItem<Checkpointing, ParseCheckpointing, kCheckpointings>;
constexpr char kDevices[] = "cpu or nvme";
constexpr char kBackends[] = "gpu or cpu";
using DeviceChoice = One<WordItem<OffloadDevice, ParseOffloadDevice, kDevices>>;
using BackendChoice = One<WordItem<Backend, ParseBackend, kBackends>>;

std::string ModelHelp() {
  return absl::StrCat("models: presets (", absl::StrJoin(PresetNames(), ", "),
                      ") or model files ending in .json (footprint/model_json.h)");
}

}  // namespace
}  // namespace zero::footprint

// Abseil's flag macros belong at global scope (they name absl:: unqualified).
using zero::footprint::AttentionItem;
using zero::footprint::BackendChoice;
using zero::footprint::ByteSize;
using zero::footprint::CheckpointingItem;
using zero::footprint::DeviceChoice;
using zero::footprint::MicroBatchItem;
using zero::footprint::SeqItem;
using zero::footprint::Count;
using zero::footprint::KernelsItem;
using zero::footprint::Knobs;
using zero::footprint::List;
using zero::footprint::ModelHelp;
using zero::footprint::ModelItem;
using zero::footprint::OffloadItem;
using zero::footprint::OptimizerItem;
using zero::footprint::Options;
using zero::footprint::PrecisionItem;
using zero::footprint::RanksItem;
using zero::footprint::StageItem;
using zero::footprint::WholeNumber;

// The defaults come from Options and Knobs, so there is one place for each.
ABSL_FLAG(List<ModelItem>, model, List<ModelItem>{Options{}.models}, ModelHelp());
ABSL_FLAG(List<RanksItem>, ranks, List<RanksItem>{Options{}.ranks},
          "simulated ranks (1 to 16777216)");
ABSL_FLAG(List<StageItem>, stage, List<StageItem>{Options{}.stages}, "ZeRO stages (0 to 3)");
ABSL_FLAG(List<PrecisionItem>, precision, List<PrecisionItem>{Options{}.precisions},
          "parameter precisions: fp32, bf16, fp16 (mixed: fp32 master weights)");
ABSL_FLAG(List<OptimizerItem>, optimizer, List<OptimizerItem>{Options{}.optimizers},
          "optimizers: adam (AdamW), sgd (momentum 0.9)");
ABSL_FLAG(List<OffloadItem>, offload, zero::footprint::DefaultOffloads(),
          "what lives in pinned host memory: none, optimizer (stages 1-3), parameters (stage "
          "3), or nvme (optimizer with --offload_device=nvme: ZeRO-Infinity)");
ABSL_FLAG(DeviceChoice, offload_device, DeviceChoice{Knobs{}.offload_device},
          "with --offload: cpu, or nvme (master weights and optimizer state in a file per "
          "rank: ZeRO-Infinity)");
ABSL_FLAG(List<SeqItem>, seq, List<SeqItem>{Options{}.seqs},
          "tokens per sequence, for activations (0: none; transformer models)");
ABSL_FLAG(List<MicroBatchItem>, micro_batch, List<MicroBatchItem>{Options{}.micro_batches},
          "sequences per micro-batch (1 to 4096)");
ABSL_FLAG(List<KernelsItem>, kernels, List<KernelsItem>{Options{}.kernels},
          "the model code: transformers (what its classes save) or fused (fused norms, "
          "flash-attn's layout)");
ABSL_FLAG(List<AttentionItem>, attention, List<AttentionItem>{Options{}.attentions},
          "attn_implementation: eager (keeps the softmax of the scores), sdpa or flash (keep "
          "a log-sum-exp)");
ABSL_FLAG(BackendChoice, backend, BackendChoice{Options{}.backend},
          "whose kernels --kernels=transformers follows: gpu, or cpu (for validating against "
          "transformers on the CPU)");
ABSL_FLAG(List<CheckpointingItem>, checkpointing,
          List<CheckpointingItem>{Options{}.checkpointings},
          "activation checkpointing: none, selective (fused kernels: recomputes eager "
          "attention's softmax), full (keeps each layer's input, as transformers does)");
ABSL_FLAG(WholeNumber, bucket_elements, WholeNumber{Knobs{}.bucket_elements},
          "elements per gradient bucket (reduce-scatter unit)");
ABSL_FLAG(WholeNumber, prefetch_elements, WholeNumber{Knobs{}.prefetch_elements},
          "stage 3: elements gathered ahead of use");
ABSL_FLAG(WholeNumber, persistence_threshold, WholeNumber{Knobs{}.persistence_threshold},
          "stage 3: parameters this small stay gathered");
ABSL_FLAG(WholeNumber, max_live_elements, WholeNumber{Knobs{}.max_live_elements},
          "stage 3: gathered elements allowed at once");
ABSL_FLAG(Count<1000>, steps, Count<1000>{Knobs{}.steps}, "training steps per run (1 to 1000)");
ABSL_FLAG(ByteSize, device_memory, ByteSize{Knobs{}.device_memory},
          "the card to fit in (GB = 1e9 bytes, GiB = 2^30)");
ABSL_FLAG(Count<(1 << 16)>, gpus_per_node, Count<(1 << 16)>{Knobs{}.gpus_per_node},
          "GPUs per node, for DeepSpeed's estimators");
ABSL_FLAG(bool, hierarchical, Knobs{}.hierarchical,
          "ranks on several nodes: collectives in two steps (inside, then across)");
ABSL_FLAG(bool, hpz, Knobs{}.hpz, "stage 3 on several nodes: keep a node's partition (hpZ)");
ABSL_FLAG(int, quantized_weights_bits, Knobs{}.quantized_weights_bits,
          "stage 3's gathers quantized to 8 or 4 bits (0: off; ZeRO++'s qwZ)");
ABSL_FLAG(int, quantized_gradients_bits, Knobs{}.quantized_gradients_bits,
          "gradient reductions quantized to 8 or 4 bits (0: off; ZeRO++'s qgZ)");
ABSL_FLAG(std::string, json, "", "also write the results as JSON to this file");
ABSL_FLAG(std::string, csv, "", "also write the results as CSV to this file");
ABSL_FLAG(std::string, svg, "", "also write a bar chart (SVG) to this file");
ABSL_FLAG(std::string, timeline, "",
          "write one run's last step as an SVG: the pool's bytes by tag over time");
ABSL_FLAG(bool, plan, false,
          "plan: which stage, offload, checkpointing and micro-batch fit --cards x --nodes");
ABSL_FLAG(Count<(1 << 16)>, cards, Count<(1 << 16)>{Options{}.cards},
          "the planner: cards per node (ranks = cards x nodes)");
ABSL_FLAG(Count<(1 << 16)>, nodes, Count<(1 << 16)>{Options{}.nodes}, "the planner: nodes");
ABSL_FLAG(ByteSize, host_memory, ByteSize{Options{}.host_memory},
          "the planner: host memory per node, for offload");

namespace zero::footprint {
namespace {

absl::Status Bad(absl::string_view option, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrFormat("--%s: %s", option, what));
}

// This program's flags are the ones this file defines: others linked in
// (--zero_devices, abseil's own) mean nothing to it.
absl::CommandLineFlag* OwnFlag(absl::string_view name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && flag->Filename() == __FILE__ ? flag : nullptr;
}

// Every flag of this file at its default, on entry and on exit, so only
// `args` count and the process's flags are as they were found. (Not
// absl::FlagSaver: it logs every flag it restores to stderr.)
class OwnFlagsAtDefaults {
 public:
  OwnFlagsAtDefaults() { Reset(); }
  ~OwnFlagsAtDefaults() { Reset(); }
  OwnFlagsAtDefaults(const OwnFlagsAtDefaults&) = delete;
  OwnFlagsAtDefaults& operator=(const OwnFlagsAtDefaults&) = delete;

 private:
  static void Reset() {
    for (const auto& [name, flag] : absl::GetAllFlags()) {
      // Cannot fail: each AbslUnparseFlag writes what its AbslParseFlag reads.
      std::string error;
      if (flag->Filename() == __FILE__) flag->ParseFrom(flag->DefaultValue(), &error);
    }
  }
};

// Abseil wraps our error as "Illegal value 'V' specified for flag 'N'; E":
// the line users see is "--N: E", as for every other mistake.
std::string WhatIsWrong(absl::string_view name, absl::string_view value, std::string error) {
  const std::string prefix =
      absl::StrCat("Illegal value '", value, "' specified for flag '", name, "'; ");
  if (absl::StartsWith(error, prefix)) error.erase(0, prefix.size());
  return error;
}

// One argument (and maybe the next, for "--name value"): sets its flag and
// adds its name to `given`.
absl::Status Apply(const std::vector<std::string>& args, size_t& i,
                   std::set<std::string>& given) {
  const std::string& arg = args[i];
  if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unexpected argument '%s' (options look like --name=value; see --help)", arg));
  }
  const size_t eq = arg.find('=');
  const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  absl::CommandLineFlag* flag = OwnFlag(name);
  if (flag == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown option --%s (see --help)", name));
  }
  std::string value;
  if (eq != std::string::npos) {
    value = arg.substr(eq + 1);
  } else if (flag->IsOfType<bool>()) {
    value = "true";  // a switch (--plan) takes no value unless given with '='
  } else if (i + 1 < args.size()) {
    value = args[++i];
  } else {
    return Bad(name, "needs a value");
  }
  std::string error;
  if (!flag->ParseFrom(value, &error)) return Bad(name, WhatIsWrong(name, value, error));
  given.insert(name);
  return absl::OkStatus();
}

// --offload=nvme: optimizer offload with the state in a file, which the
// --offload_device knob says for every offloading run of the sweep.
absl::Status ApplyNvmeShorthand(Options& o) {
  const std::vector<OffloadChoice> items = absl::GetFlag(FLAGS_offload).items;
  if (std::none_of(items.begin(), items.end(), [](const OffloadChoice& c) { return c.nvme; })) {
    return absl::OkStatus();
  }
  for (const OffloadChoice& c : items) {
    if (!c.nvme && c.offload != Offload::kNone) {
      return Bad("offload", absl::StrCat("nvme and ", std::string(Name(c.offload)),
                                         " in one sweep: the offload device is one for all "
                                         "(give --offload_device=nvme instead)"));
    }
  }
  if (o.given.count("offload_device") > 0 && o.knobs.offload_device != OffloadDevice::kNvme) {
    return Bad("offload", "nvme puts the optimizer state in a file, --offload_device says cpu");
  }
  o.knobs.offload_device = OffloadDevice::kNvme;
  std::vector<Offload> once;  // nvme and optimizer are one placement now
  for (Offload x : o.offloads) {
    if (std::find(once.begin(), once.end(), x) == once.end()) once.push_back(x);
  }
  o.offloads = std::move(once);
  return absl::OkStatus();
}

Options FromFlags() {
  Options o;
  o.models = absl::GetFlag(FLAGS_model).items;
  o.ranks = absl::GetFlag(FLAGS_ranks).items;
  o.stages = absl::GetFlag(FLAGS_stage).items;
  o.precisions = absl::GetFlag(FLAGS_precision).items;
  o.optimizers = absl::GetFlag(FLAGS_optimizer).items;
  o.offloads.clear();
  for (const OffloadChoice& c : absl::GetFlag(FLAGS_offload).items) o.offloads.push_back(c.offload);
  o.seqs = absl::GetFlag(FLAGS_seq).items;
  o.micro_batches = absl::GetFlag(FLAGS_micro_batch).items;
  o.kernels = absl::GetFlag(FLAGS_kernels).items;
  o.attentions = absl::GetFlag(FLAGS_attention).items;
  o.backend = absl::GetFlag(FLAGS_backend).value;
  o.checkpointings = absl::GetFlag(FLAGS_checkpointing).items;
  o.knobs.bucket_elements = absl::GetFlag(FLAGS_bucket_elements).value;
  o.knobs.prefetch_elements = absl::GetFlag(FLAGS_prefetch_elements).value;
  o.knobs.persistence_threshold = absl::GetFlag(FLAGS_persistence_threshold).value;
  o.knobs.max_live_elements = absl::GetFlag(FLAGS_max_live_elements).value;
  o.knobs.steps = absl::GetFlag(FLAGS_steps).value;
  o.knobs.device_memory = absl::GetFlag(FLAGS_device_memory).bytes;
  o.knobs.gpus_per_node = absl::GetFlag(FLAGS_gpus_per_node).value;
  o.knobs.hierarchical = absl::GetFlag(FLAGS_hierarchical);
  o.knobs.hpz = absl::GetFlag(FLAGS_hpz);
  o.knobs.quantized_weights_bits = absl::GetFlag(FLAGS_quantized_weights_bits);
  o.knobs.quantized_gradients_bits = absl::GetFlag(FLAGS_quantized_gradients_bits);
  o.knobs.offload_device = absl::GetFlag(FLAGS_offload_device).value;
  o.json_path = absl::GetFlag(FLAGS_json);
  o.csv_path = absl::GetFlag(FLAGS_csv);
  o.svg_path = absl::GetFlag(FLAGS_svg);
  o.timeline_path = absl::GetFlag(FLAGS_timeline);
  o.plan = absl::GetFlag(FLAGS_plan);
  o.cards = absl::GetFlag(FLAGS_cards).value;
  o.nodes = absl::GetFlag(FLAGS_nodes).value;
  o.host_memory = absl::GetFlag(FLAGS_host_memory).bytes;
  return o;
}

constexpr char kAbout[] =
    R"(measured memory and traffic of one rank of a ZeRO job, beside the
ZeRO paper's formulas and DeepSpeed's estimators. The real engine runs one rank
on a meta device (addresses, no bytes) with a communicator that has no peers;
every rank of a ZeRO job holds the same bytes, so one rank stands for all.

usage: bazel run -c opt //footprint -- [--name=value | --name value]...

--model, --ranks, --stage, --precision, --optimizer and --offload take comma
lists; the runs are their cross product (a sweep). Element counts accept
500000000 or 5e8. --help lists the flags below; --help=WORD those whose name
or help holds WORD; --helpfull adds the flags of the libraries linked in,
which this program does not read.
Exit status: 0 done, 2 bad input or a configuration the engine rejects
(one line on stderr), 1 an output file could not be written.)";

// Whether `arg` asks for help; if so, which help goes in `options`.
bool HelpRequest(const std::string& arg, Options& options) {
  if (arg == "--help" || arg == "-h") {
    options.help = std::max(options.help, Options::Help::kShort);
  } else if (arg == "--helpfull") {
    options.help = Options::Help::kFull;
  } else if (absl::StartsWith(arg, "--help=")) {
    options.help = std::max(options.help, Options::Help::kShort);
    options.help_match = arg.substr(7);
  } else {
    return false;
  }
  return true;
}

// Options given that the runs would not read: an error, not a silence.
absl::Status CheckNothingIgnored(const Options& o) {
  auto given = [&](const char* name) { return o.given.count(name) > 0; };
  for (const char* planner : {"cards", "nodes", "host_memory"}) {
    if (given(planner) && !o.plan) {
      return Bad(planner, "is the planner's: give --plan too (or --ranks for a sweep)");
    }
  }
  const bool offloads = std::any_of(o.offloads.begin(), o.offloads.end(),
                                    [](Offload x) { return x != Offload::kNone; });
  if (given("offload_device") && o.knobs.offload_device != OffloadDevice::kCpu && !offloads &&
      !o.plan) {
    return Bad("offload_device", "nvme places offloaded state: give --offload=optimizer too");
  }
  const bool activations = std::any_of(o.seqs.begin(), o.seqs.end(), [](uint64_t s) { return s; });
  for (const char* option : {"micro_batch", "kernels", "attention", "checkpointing", "backend"}) {
    if (given(option) && !activations) {
      return Bad(option, "shapes activations, which --seq=0 leaves out");
    }
  }
  if (o.backend == Backend::kCpu &&
      std::find(o.kernels.begin(), o.kernels.end(), Kernels::kTransformers) == o.kernels.end()) {
    return Bad("backend", "cpu is what --kernels=transformers runs on the CPU; give it too");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  OwnFlagsAtDefaults defaults;
  Options help;  // only its help fields
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    if (HelpRequest(args[i], help)) continue;
    if (absl::Status s = Apply(args, i, given); !s.ok()) return s;
  }
  Options options = FromFlags();
  options.given = std::move(given);
  options.help = help.help;
  options.help_match = help.help_match;
  RETURN_IF_ERROR(ApplyNvmeShorthand(options));
  RETURN_IF_ERROR(CheckNothingIgnored(options));
  return options;
}

std::string Usage(Options::Help which, const std::string& match) {
  std::ostringstream out;
  if (which == Options::Help::kFull) {
    WriteFlagsHelp(out, "footprint", "", kAbout);
    return out.str();
  }
  if (match.empty()) {
    WriteFlagsHelp(out, "footprint", __FILE__, kAbout);
    return out.str();
  }
  // --help=WORD, as the listing's footer describes it, over this program's flags.
  std::vector<const absl::CommandLineFlag*> matches;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename() == __FILE__ &&
        (absl::StrContains(name, match) || absl::StrContains(flag->Help(), match))) {
      matches.push_back(flag);
    }
  }
  std::sort(matches.begin(), matches.end(),
            [](auto* a, auto* b) { return a->Name() < b->Name(); });
  out << "footprint: flags whose name or help holds '" << match << "':\n";
  for (const absl::CommandLineFlag* flag : matches) WriteFlagHelp(out, *flag);
  if (matches.empty()) out << "  none (see --help)\n";
  return out.str();
}

}  // namespace zero::footprint
