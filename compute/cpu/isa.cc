#include "compute/cpu/isa.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace zero::cpu {
namespace {

#if defined(__x86_64__)
// __builtin_cpu_supports has no "f16c" in GCC 12: CPUID leaf 1, ECX bit 29.
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

std::atomic<int>& ActiveSlot() {
  static std::atomic<int> slot{static_cast<int>(BestCpuIsa())};
  return slot;
}

}  // namespace

std::string_view Name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "invalid";
}

bool IsSupported(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return true;
#if defined(__x86_64__)
    // __builtin_cpu_supports also checks that the OS saves the wide registers.
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && HasF16c();
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
#endif
    default:
      return false;
  }
}

CpuIsa BestCpuIsa() {
  if (IsSupported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (IsSupported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kScalar;
}

absl::Status SetCpuIsa(CpuIsa isa) {
  if (!IsSupported(isa)) {
    return absl::FailedPreconditionError(
        absl::StrCat("this CPU or build cannot run the ", std::string(Name(isa)), " kernels"));
  }
  ActiveSlot().store(static_cast<int>(isa), std::memory_order_relaxed);
  return absl::OkStatus();
}

CpuIsa ActiveCpuIsa() { return static_cast<CpuIsa>(ActiveSlot().load(std::memory_order_relaxed)); }

}  // namespace zero::cpu
