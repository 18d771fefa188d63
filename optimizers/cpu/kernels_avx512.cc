// Built with -mavx512f -ffp-contract=off; runs only where
// IsSupported(CpuIsa::kAvx512).

#include "compute/cpu/level_file.h"  // first: its pragmas cover the whole file

#include "optimizers/cpu/kernel_table.h"

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
