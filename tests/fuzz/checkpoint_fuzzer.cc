// The checkpoint readers on damaged folders: each input is a whole
// checkpoint (file_archive.h: the manifest, the data files, `latest`),
// which Load (into 3 ranks, resharding the seeds' 2) and the consolidation
// tool then read. Either may fail, with a message; neither may crash, read
// out of bounds or leak. The seeds are checkpoints a real run saved
// (checkpoint_seeds.cc).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "tests/fuzz/checkpoint_fuzzer.h"
#include "tests/zero/checkpoint/cluster.h"
#include "tests/zero/test_util.h"
#include "zero/checkpoint/consolidate.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"
#include "zero/checkpoint/internal/data_file.h"

namespace zero::fuzz {
namespace {

using testing_model::Cluster;

struct State {
  std::unique_ptr<testing_model::Model> model = SeedModel();
  std::unique_ptr<Cluster> loader;
  std::string root, output;
};

State& Global() {
  static State* state = [] {
    auto* s = new State;
    absl::StatusOr<std::unique_ptr<Cluster>> loader =
        Cluster::Create(*s->model, SeedRun(3), testing_model::AdamW());
    if (!loader.ok()) {
      std::fprintf(stderr, "checkpoint_fuzzer: %s\n", loader.status().ToString().c_str());
      std::abort();
    }
    s->loader = *std::move(loader);
    const char* tmp = std::getenv("TEST_TMPDIR");
    s->root = absl::StrFormat("%s/checkpoint_fuzzer.%d", tmp ? tmp : "/tmp", getpid());
    s->output = s->root + ".safetensors";
    return s;
  }();
  return *state;
}

// The manifest's header line rewritten to match its body (its JSON).
void Reseal(Archive& archive) {
  for (ArchivedFile& f : archive.files) {
    if (f.name != "manifest") continue;
    const size_t newline = f.contents.find('\n');
    const std::string body = newline == std::string::npos ? "" : f.contents.substr(newline + 1);
    f.contents = absl::StrFormat("zero-checkpoint-manifest v%d crc32c=%08x bytes=%d\n%s",
                                 checkpoint::kFormatVersion, zero::Crc32c(body),
                                 body.size(), body);
  }
}

}  // namespace

}  // namespace zero::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zero::fuzz;
  State& s = Global();
  Archive archive = Unpack(std::string_view(reinterpret_cast<const char*>(data), size));
  if (archive.files.size() > 16) return 0;
  if (archive.flags & kResealManifest) Reseal(archive);
  WriteCheckpoint(s.root, archive);
  (void)zero::testing_model::AllOk(s.loader->Load(s.root));
  (void)zero::checkpoint::ConsolidateToSafetensors(s.root, s.output);
  std::filesystem::remove(s.output);
  return 0;
}
