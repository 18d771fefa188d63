// The memory checks on the cuda backend, for a session lent a card. Prints
// one line per check ("PASS name: ...", "FAIL name: ..." or "SKIP name: ...").
// Exits 1 when any failed; 77 when none failed but some were skipped (no
// card or no driver: all of them; one card: peer_copy); 0 when all passed.
// card_check.sh decides whether a skip is acceptable.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/units.h"
#include "memory/device_system.h"

namespace zero {
namespace {

constexpr int kSkipped = 77;  // the exit status of a run that skipped checks (automake's)
int failures = 0;
int skips = 0;

void Report(const std::string& name, bool ok, const std::string& detail) {
  std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

void Skip(const std::string& name, const std::string& why) {
  std::printf("SKIP %s: %s\n", name.c_str(), why.c_str());
  std::fflush(stdout);
  ++skips;
}

void CheckDataRoundTrip(DeviceSystem& system) {
  DevicePool& pool = system.pool(0);
  Stream* s = system.default_stream(0);
  const size_t bytes = 256 * kMiB;
  void* p = pool.Allocate(bytes, Tag::kParameters).value();
  std::vector<unsigned char> host(bytes), back(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>(i * 131 + 7);
  bool ok = s->Copy(p, host.data(), bytes).ok() && s->Copy(back.data(), p, bytes).ok() &&
            s->Synchronize().ok() && std::memcmp(host.data(), back.data(), bytes) == 0;
  Report("data_round_trip", ok, "256 MiB host -> pool -> host, bytes equal");
  ok = s->Fill(p, 0xAB, bytes).ok() && s->Copy(back.data(), p, 4096).ok() && s->Synchronize().ok();
  for (int i = 0; i < 4096 && ok; ++i) ok = back[i] == 0xAB;
  Report("fill", ok, "cudaMemsetAsync through Stream::Fill");
  ok = system.device_of(p) == 0;
  Report("device_of", ok, "pointer in card 0's slice");
  (void)pool.Deallocate(p, bytes);
}

void CheckTrimAndReuse(DeviceSystem& system) {
  DevicePool& pool = system.pool(0);
  void* a = pool.Allocate(kMiB).value();
  (void)pool.Deallocate(a, kMiB);
  void* b = pool.Allocate(kMiB).value();
  Report("cached_reuse", a == b && pool.stats().num_maps >= 1, "freed block served again");
  (void)pool.Deallocate(b, kMiB);
  const size_t released = pool.Trim().value_or(0);
  Report("trim", pool.stats().reserved == 0 && system.space().mapped_bytes(0) == 0,
         absl::StrFormat("released %s, reserved now %s", FormatBytes(released),
                         FormatBytes(pool.stats().reserved)));
}

void CheckCrossStream(DeviceSystem& system) {
  DevicePool& pool = system.pool(0);
  Stream* a = system.CreateStream(0).value();
  Stream* b = system.CreateStream(0).value();
  void* p = pool.Allocate(64 * kMiB, Tag::kActivations, a).value();
  bool ok = a->Fill(p, 1, 64 * kMiB).ok() && pool.Deallocate(p, 64 * kMiB, a).ok();
  void* q = pool.Allocate(64 * kMiB, Tag::kActivations, b).value();
  std::vector<unsigned char> back(16);
  ok = ok && b->Copy(back.data(), q, 16).ok() && b->Synchronize().ok() && back[0] == 1;
  Report("cross_stream_reuse", ok && p == q, "B waited for A's work on the block");
  (void)pool.Deallocate(q, 64 * kMiB, b);
}

void CheckOutOfMemory(DeviceSystem& system) {
  DevicePool& pool = system.pool(0);
  auto p = pool.Allocate(pool.stats().capacity + 1);
  Report("oom_is_an_error", absl::IsResourceExhausted(p.status()),
         std::string(p.status().message()).substr(0, 160));
}

void CheckPeers(DeviceSystem& system) {
  const int n = system.device_count();
  if (n < 2) return Skip("peer_copy", "one card: no copy between cards to check");
  void* a = system.pool(0).Allocate(kMiB).value();
  void* b = system.pool(n - 1).Allocate(kMiB).value();
  Stream* s = system.default_stream(n - 1);
  std::vector<unsigned char> back(16);
  bool ok = system.default_stream(0)->Fill(a, 9, kMiB).ok() &&
            system.default_stream(0)->Synchronize().ok() && s->Copy(b, a, kMiB).ok() &&
            s->Copy(back.data(), b, 16).ok() && s->Synchronize().ok() && back[3] == 9;
  Report("peer_copy", ok, absl::StrFormat("card 0 -> card %d inside one range", n - 1));
}

void CheckRandomChurn(DeviceSystem& system) {
  DevicePool& pool = system.pool(0);
  std::mt19937_64 rng(3);
  std::vector<std::pair<void*, size_t>> live;
  bool ok = true;
  for (int i = 0; i < 20000 && ok; ++i) {
    if (!live.empty() && (rng() % 2 || live.size() > 200)) {
      const size_t k = rng() % live.size();
      ok = pool.Deallocate(live[k].first, live[k].second).ok();
      live.erase(live.begin() + k);
    } else {
      const size_t bytes = size_t(1) << (8 + rng() % 19);
      auto p = pool.Allocate(bytes);
      ok = p.ok() || absl::IsResourceExhausted(p.status());
      if (p.ok()) live.emplace_back(*p, bytes);
    }
  }
  for (auto& [p, bytes] : live) ok = ok && pool.Deallocate(p, bytes).ok();
  ok = ok && pool.Trim().ok() && pool.stats().reserved == 0;
  Report("random_churn", ok, "20,000 allocations/frees, then nothing reserved after trim");
}

}  // namespace
}  // namespace zero

int main() {
  zero::DeviceSpec cards;  // every visible card; by name, the other fields at their defaults
  cards.kind = zero::DeviceSpec::Kind::kCuda;
  auto system = zero::DeviceSystem::Create(cards);
  if (!system.ok()) {
    zero::Skip("memory_checks", std::string(system.status().message()));
    return zero::kSkipped;
  }
  std::printf("PASS cuda_backend: %d card(s), %s each, granule %s\n", (*system)->device_count(),
              zero::FormatBytes((*system)->backend().capacity(0)).c_str(),
              zero::FormatBytes((*system)->backend().granularity()).c_str());
  zero::CheckDataRoundTrip(**system);
  zero::CheckTrimAndReuse(**system);
  zero::CheckCrossStream(**system);
  zero::CheckOutOfMemory(**system);
  zero::CheckPeers(**system);
  zero::CheckRandomChurn(**system);
  if (zero::failures > 0) return 1;
  return zero::skips > 0 ? zero::kSkipped : 0;
}
