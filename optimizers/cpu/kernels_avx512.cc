// Built with -mavx512f -ffp-contract=off; runs only where
// IsSupported(CpuIsa::kAvx512).

// Bit-identical results across SIMD levels need every mul and add rounded on
// its own. BUILD passes -ffp-contract=off; this keeps it so for any build.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "optimizers/cpu/kernel_table.h"

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* seeds the
// masked builtins) wherever they inline into our code: a known false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__AVX512F__)
#include "compute/cpu/ops_avx512.h"
#include "optimizers/cpu/kernels_impl.h"
#endif

namespace zero::cpu {

const KernelTable& Avx512Kernels() {
#if defined(__AVX512F__)
  static const KernelTable table = MakeKernelTable<avx512::Ops>();
  return table;
#else
  return ScalarKernels();  // not an x86 build: KernelsFor never selects this level
#endif
}

}  // namespace zero::cpu
