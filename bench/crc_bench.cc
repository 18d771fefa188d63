// Checkpoint checksum speed against the memory it reads (issue 17's goal:
// at least 15 GB/s per core with the crc32 instruction). One core, best of
// 5 passes over a buffer larger than the caches:
//   - CRC-32C (base/crc32c.h: three interleaved lanes),
//   - one dependent chain of the instruction (what it was before the lanes),
//   - the slicing-by-8 tables (the fallback without SSE4.2),
//   - memcpy of the same bytes (the limit: reads them and writes as many),
// printed as GB/s and as ratios to memcpy.
//   bazel run -c opt //bench:crc_bench -- --mb=256
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "base/crc32c.h"

ABSL_FLAG(int, mb, 256, "buffer size in MiB");

namespace {

template <class Fn>
double BestSeconds(Fn fn) {
  double best = 1e30;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const size_t bytes = size_t(absl::GetFlag(FLAGS_mb)) << 20;
  std::vector<unsigned char> data(bytes), copy(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>(i * 2654435761u >> 24);
  volatile uint32_t sink = 0;
  const double crc = BestSeconds([&] { sink = zero::Crc32c(data.data(), bytes); });
  // Pieces one byte short of a three-lane round take the single chain.
  const double one_chain = BestSeconds([&] {
    uint32_t c = 0;
    for (size_t at = 0; at < bytes; at += 12287) {
      c = zero::Crc32cExtend(c, data.data() + at, std::min<size_t>(12287, bytes - at));
    }
    sink = c;
  });
  const double tables =
      BestSeconds([&] { sink = zero::Crc32cExtendPortable(0, data.data(), bytes / 8); }) * 8;
  const double memcpy_s = BestSeconds([&] { std::memcpy(copy.data(), data.data(), bytes); });
  (void)sink;
  const double gb = bytes / 1e9;
  std::printf("bytes %zu\n", bytes);
  std::printf("crc32c (3 lanes)  %7.2f GB/s  %.3f x memcpy\n", gb / crc, memcpy_s / crc);
  std::printf("crc32c (1 chain)  %7.2f GB/s  %.3f x memcpy\n", gb / one_chain,
              memcpy_s / one_chain);
  std::printf("crc32c (tables)   %7.2f GB/s  %.3f x memcpy\n", gb / tables, memcpy_s / tables);
  std::printf("memcpy            %7.2f GB/s\n", gb / memcpy_s);
  return 0;
}
