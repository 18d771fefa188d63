// The command line: what a good run prints and writes, and one line with
// exit status 2 for every kind of bad input.
#include "footprint/cli.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/json.h"
#include "gmock/gmock.h"
#include "tests/footprint/run_footprint.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string WriteModel(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(CliTest, HelpListsPresetsAndOptions) {
  Result r = Footprint({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("llama2-70b"));
  EXPECT_THAT(r.out, HasSubstr("--persistence_threshold"));
  EXPECT_EQ(r.err, "");
}

// The listing keeps abseil's layout (footprint/flag_help.h): lines of at
// most 80 columns, a flag's continued six spaces in, string defaults quoted.
TEST(CliTest, HelpKeepsAbseilsLayout) {
  Result r = Footprint({"--help"});
  EXPECT_THAT(r.out, StartsWith("footprint: measured memory and traffic of one rank"));
  EXPECT_THAT(r.out, HasSubstr("\n\n  Flags from footprint/options.cc:\n"));
  // The default is what transformers' AutoModelForCausalLM trains with.
  EXPECT_THAT(r.out, HasSubstr("    --attention (attn_implementation: eager (keeps the softmax "
                               "of the scores),\n      sdpa or flash (keep a log-sum-exp)); "
                               "default: sdpa;\n"));
  EXPECT_THAT(r.out, HasSubstr("(fused norms, flash-attn's layout)); default: transformers;\n"));
  EXPECT_THAT(r.out, HasSubstr("    --csv (also write the results as CSV to this file); "
                               "default: \"\";\n"));
  EXPECT_THAT(r.out, HasSubstr(";\n\nTry --helpfull to get a list of all flags or --help=substring "
                               "shows help for\nflags which include"));
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) EXPECT_LE(line.size(), 80u) << line;
  Result word = Footprint({"--help=csv"});
  EXPECT_EQ(word.out,
            "footprint: flags whose name or help holds 'csv':\n"
            "    --csv (also write the results as CSV to this file); default: \"\";\n");
}

TEST(CliTest, SweepPrintsOneLinePerRunAndWritesFiles) {
  const std::string json = TempPath("f.json"), csv = TempPath("f.csv"), svg = TempPath("f.svg");
  Result r = Footprint({"--model=gpt2-small", "--ranks=2,8", "--stage=0,1,2,3", "--precision=fp32",
                        "--optimizer=adam,sgd", "--json=" + json, "--csv", csv, "--svg=" + svg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank 0 stands for all"));
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n'))
    lines += absl::StartsWith(line, "gpt2-small");
  EXPECT_EQ(lines, 16);
  // Progress lines (not a terminal), one per run.
  EXPECT_THAT(r.err, HasSubstr("footprint: [16/16] gpt2-small N=8 stage 3 fp32 sgd"));
  absl::StatusOr<json::Value> parsed = json::Parse(Read(json));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const json::Value& runs = *parsed->Find("runs");
  ASSERT_EQ(runs.items.size(), 16u);
  EXPECT_EQ(runs.items[0].Find("psi")->AsUint(), 124'439'808u);
  EXPECT_EQ(runs.items[0].Find("stage")->AsUint(), 0u);
  EXPECT_EQ(runs.items[0].Find("deepspeed_gpu_bytes")->kind, json::Value::Kind::kNull);
  const std::vector<std::string> csv_lines = absl::StrSplit(Read(csv), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv_lines.size(), 17u);
  EXPECT_THAT(csv_lines[0], StartsWith("model,psi,padded_numel,"));
  EXPECT_THAT(csv_lines[1], StartsWith("gpt2-small,124439808,"));
  const std::string chart = Read(svg);
  EXPECT_THAT(chart, StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(chart, HasSubstr("optimizer state"));
  EXPECT_THAT(chart, HasSubstr("gpt2-small N=8 stage 3 fp32 sgd"));
  EXPECT_THAT(chart, HasSubstr("</svg>"));
}

TEST(CliTest, ModelFileRuns) {
  const std::string path = WriteModel("ok.json", R"({"name": "toy", "modules": [
        {"name": "layer", "repeat": 3, "params": [{"name": "w", "shape": [512, 512]}]}]})");
  Result r = Footprint({"--model=" + path, "--ranks=4", "--stage=3", "--precision=fp32"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("toy "));
}

// A model whose repeats multiply past a limit: one line, exit 2, at once
// (it used to be expanded until the process died of std::bad_alloc).
TEST(CliTest, NestedRepeatsPastTheLimitExitTwo) {
  const std::string path = WriteModel("huge.json", R"({"modules": [
  {"name": "layers", "repeat": 1000000, "modules": [
    {"name": "experts", "repeat": 1000000, "params": [{"name": "w", "shape": [16]}]}]}]})");
  Result r = Footprint({"--model=" + path, "--ranks=64", "--stage=3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "footprint: " + path +
                       ":2:32: \"layers\" repeat 1000000 x \"experts\" repeat 1000000 = 1e+12 "
                       "modules, over the limit of 2000000 modules\n");
  EXPECT_EQ(r.out, "");
}

struct BadArgs {
  std::vector<std::string> args;
  std::string message;  // the whole line on stderr
};

class BadInput : public ::testing::TestWithParam<BadArgs> {};

TEST_P(BadInput, OneLineAndExitTwo) {
  Result r = Footprint(GetParam().args);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "footprint: " + GetParam().message + "\n");
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInput,
    ::testing::Values(
        BadArgs{{"--model=gpt3"},
                "--model: unknown preset 'gpt3' (presets: gpt2-small, gpt2-medium, gpt2-large, "
                "gpt2-xl, zero-1.5b, zero-7.5b, zero-100b, llama2-7b, llama2-13b, llama2-70b, "
                "llama3-8b, llama3-70b, mixtral-8x7b, deepseek-v3; or a file ending in .json)"},
        BadArgs{{"--ranks=0"}, "--ranks: '0' is not a number of ranks from 1 to 16777216"},
        BadArgs{{"--ranks=8,,64"}, "--ranks: empty item in the list '8,,64'"},
        BadArgs{{"--stage=4"}, "--stage: '4' is not 0, 1, 2 or 3"},
        BadArgs{{"--stage=-1"}, "--stage: '-1' is not 0, 1, 2 or 3"},
        BadArgs{{"--precision=fp8"}, "--precision: 'fp8' is not fp32, bf16 or fp16"},
        BadArgs{{"--optimizer=lamb"}, "--optimizer: 'lamb' is not adam or sgd"},
        BadArgs{{"--offload=ram"}, "--offload: 'ram' is not none, optimizer, parameters or nvme"},
        BadArgs{{"--offload=optimizer,nvme"},
                "--offload: nvme and optimizer in one sweep: the offload device is one for all "
                "(give --offload_device=nvme instead)"},
        BadArgs{{"--offload=nvme", "--offload_device=cpu"},
                "--offload: nvme puts the optimizer state in a file, --offload_device says cpu"},
        BadArgs{{"--steps=0"}, "--steps: 0 is not from 1 to 1000"},
        BadArgs{{"--bucket_elements=lots"},
                "--bucket_elements: 'lots' is not a whole number (e.g. 500000000 or 5e8)"},
        BadArgs{{"--device_memory=big"}, "--device_memory: 'big' is not a size like 80GB"},
        BadArgs{{"--frobnicate=1"}, "unknown option --frobnicate (see --help)"},
        BadArgs{{"stage3"},
                "unexpected argument 'stage3' (options look like --name=value; see --help)"},
        BadArgs{{"--json"}, "--json: needs a value"},
        BadArgs{{"--seq=-1"},
                "--seq: '-1' is not a sequence length from 0 (no activations) to 1048576"},
        BadArgs{{"--seq=2000000"},
                "--seq: '2000000' is not a sequence length from 0 (no activations) to 1048576"},
        BadArgs{{"--seq=4k"},
                "--seq: '4k' is not a sequence length from 0 (no activations) to 1048576"},
        BadArgs{{"--model=gpt2-small", "--seq=512,2048"},
                "--seq: 2048 is longer than gpt2-small's 1024 learned positions"},
        BadArgs{{"--micro_batch=0"}, "--micro_batch: '0' is not a micro-batch size from 1 to 4096"},
        BadArgs{{"--attention=xformers"}, "--attention: 'xformers' is not eager, sdpa or flash"},
        BadArgs{{"--kernels=triton"}, "--kernels: 'triton' is not fused or transformers"},
        BadArgs{{"--backend=tpu"}, "--backend: 'tpu' is not gpu or cpu"},
        BadArgs{{"--backend=cpu", "--kernels=fused"},
                "--backend: cpu is what --kernels=transformers runs on the CPU; give it too"},
        // transformers' gradient checkpointing recomputes whole layers only.
        BadArgs{{"--model=gpt2-small", "--ranks=2", "--stage=0", "--checkpointing=selective"},
                "gpt2-small N=2 stage 0 bf16 adam seq=1024 mb=1 sdpa ckpt=selective: "
                "INVALID_ARGUMENT: selective checkpointing (recomputing eager attention's softmax, "
                "as Megatron-LM does) is not something transformers does: its gradient "
                "checkpointing recomputes whole layers (--checkpointing=full)"},
        BadArgs{{"--checkpointing=some"},
                "--checkpointing: 'some' is not none, selective or full"},
        // Given but never read by the runs: said, not silently dropped.
        BadArgs{{"--cards=4"},
                "--cards: is the planner's: give --plan too (or --ranks for a sweep)"},
        BadArgs{{"--host_memory=1TB"},
                "--host_memory: is the planner's: give --plan too (or --ranks for a sweep)"},
        BadArgs{{"--offload_device=nvme"},
                "--offload_device: nvme places offloaded state: give --offload=optimizer too"},
        BadArgs{{"--seq=0", "--micro_batch=4"},
                "--micro_batch: shapes activations, which --seq=0 leaves out"},
        BadArgs{{"--seq=0", "--attention=eager"},
                "--attention: shapes activations, which --seq=0 leaves out"},
        BadArgs{{"--seq=0", "--kernels=fused"},
                "--kernels: shapes activations, which --seq=0 leaves out"},
        BadArgs{{"--model=llama2-70b", "--ranks=1", "--stage=0", "--seq=1048576",
                 "--micro_batch=4096", "--attention=eager"},
                "llama2-70b N=1 stage 0 bf16 adam seq=1048576 mb=4096 eager: INVALID_ARGUMENT: "
                "the activation 'scores' would take 5.765e+17 bytes, more than the simulated "
                "device's 2^50 (lower --seq or --micro_batch)"}));

// ZeRO-Infinity as its users say it: the file's bytes per rank beside
// DeepSpeed's figure, the same run as the long form.
TEST(CliTest, OffloadNvmeReportsTheFileBesideDeepSpeed) {
  const std::string json = TempPath("nvme.json");
  Result shorthand = Footprint({"--model=gpt2-small", "--ranks=4", "--stage=3", "--precision=bf16",
                                "--offload=none,nvme", "--json=" + json});
  ASSERT_EQ(shorthand.code, 0) << shorthand.err;
  EXPECT_THAT(shorthand.out, HasSubstr("DS nvme"));
  // The offloading run's line of the report: the file's bytes and DeepSpeed's.
  const std::string report = Read(json);
  const size_t at = report.find("\"offload\": \"optimizer\"");
  ASSERT_NE(at, std::string::npos) << report;
  const std::string row = report.substr(at, report.find('}', at) - at);
  EXPECT_THAT(row, HasSubstr("\"nvme_bytes\": 373319424"));  // 12 bytes x psi / 4
  EXPECT_THAT(row, HasSubstr("\"deepspeed_nvme_rank_bytes\": 497759232"));
  Result long_form = Footprint({"--model=gpt2-small", "--ranks=4", "--stage=3",
                                "--precision=bf16", "--offload=none,optimizer",
                                "--offload_device=nvme"});
  ASSERT_EQ(long_form.code, 0) << long_form.err;
  auto rows = [](const std::string& out) {
    std::string kept;
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (absl::StartsWith(line, "gpt2-small")) absl::StrAppend(&kept, line, "\n");
    }
    return kept;
  };
  EXPECT_EQ(rows(shorthand.out), rows(long_form.out));
}

TEST(CliTest, MalformedModelFileSaysFileLineColumn) {
  const std::string path = WriteModel("bad.json",
                                      "{\"modules\": [\n  {\"name\": \"a\",\n   \"params\": "
                                      "[{\"name\": \"w\", \"shape\": [0]}]}]}");
  Result r = Footprint({"--model=" + path});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "footprint: " + path +
                       ":3:39: a dimension must be an integer from 1 to 288230376151711744, "
                       "found 0\n");
  const std::string dup = WriteModel(
      "dup.json",
      "{\"modules\": [{\"name\": \"a\", \"params\": [{\"name\": \"w\", \"shape\": [1]}]},\n"
      "{\"name\": \"a\", \"params\": [{\"name\": \"w\", \"shape\": [1]}]}]}");
  r = Footprint({"--model=" + dup});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "footprint: " + dup + ":2:10: duplicate module name 'a'\n");
  r = Footprint({"--model=" + TempPath("missing.json")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot read the model file"));
}

TEST(CliTest, HuggingFaceConfigRunsWithActivationsAndBadOnesExitTwo) {
  Result r = Footprint({"--model=tests/footprint/testdata/pythia-160m/config.json", "--ranks=8",
                        "--stage=3", "--seq=512", "--attention=eager,flash"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pythia-160m "));
  EXPECT_THAT(r.out, HasSubstr("act/L"));
  EXPECT_THAT(r.out, HasSubstr("paper/L"));
  EXPECT_THAT(r.out, HasSubstr("  attn  "));  // it varies, so it is a column
  const std::string bert = WriteModel("bert.json", R"({"model_type": "bert"})");
  r = Footprint({"--model=" + bert});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "footprint: " + bert +
                       ":1:16: model_type 'bert' is not supported (supported: gpt2, llama, "
                       "mistral, qwen2, phi3, gemma, mixtral, qwen2_moe, gpt_neox)\n");
  const std::string partial = WriteModel("partial.json", R"({"model_type": "llama"})");
  r = Footprint({"--model=" + partial});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "footprint: " + partial + ":1:1: llama config has no \"hidden_size\"\n");
}

// A list of modules has no transformer shape: it runs, without activations.
TEST(CliTest, ModuleListsRunWithoutActivationsAndSaySo) {
  Result r = Footprint({"--model=footprint/models/llama3-8b.json", "--ranks=8",
                        "--stage=3", "--seq=4096"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("footprint: llama3-8b is a list of modules without a transformer "
                               "shape: no activations\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("act/L")));
}

TEST(CliTest, AnOptionTheEngineRejectsIsOneLineAndExitTwo) {
  Result r = Footprint(
      {"--model=gpt2-small", "--ranks=2", "--stage=1", "--precision=fp32", "--bucket_elements=0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "footprint: gpt2-small N=2 stage 1 fp32 adam seq=1024 mb=1 sdpa: INVALID_ARGUMENT: "
            "bucket_elements is zero\n");
}

TEST(CliTest, SweepLeavesOutWhatTheEngineCannotDoAndSaysSo) {
  Result r =
      Footprint({"--model=gpt2-small", "--ranks=2", "--stage=0,3", "--offload=none,parameters"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("footprint: left out 1 run of the sweep: parameter offload needs "
                               "stage 3\n"));
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n'))
    lines += absl::StartsWith(line, "gpt2-small");
  EXPECT_EQ(lines, 3);
  EXPECT_THAT(r.out, HasSubstr("p.host"));  // offload columns
  // Alone, the same run is an error.
  r = Footprint({"--model=gpt2-small", "--ranks=2", "--stage=0", "--offload=parameters"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "footprint: gpt2-small N=2 stage 0 bf16 adam offload=parameters seq=1024 mb=1 sdpa: "
            "INVALID_ARGUMENT: parameter offload needs stage 3\n");
}

TEST(CliTest, UnwritableOutputIsExitOne) {
  Result r = Footprint({"--model=gpt2-small", "--ranks=2", "--stage=0", "--precision=fp32",
                        "--csv=/nonexistent/dir/out.csv"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, StartsWith("footprint: cannot write /nonexistent/dir/out.csv"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

}  // namespace
}  // namespace zero::footprint
