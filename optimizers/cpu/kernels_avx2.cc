// Built with -mavx2 -mf16c; runs only where IsSupported(CpuIsa::kAvx2).

#include "compute/cpu/level_file.h"  // first: its pragmas cover the whole file

#include "optimizers/cpu/kernel_table.h"

#if defined(__AVX2__) && defined(__F16C__)
#include "compute/cpu/ops_avx2.h"
#include "optimizers/cpu/kernels_impl.h"
#endif

namespace zero::cpu {

const KernelTable& Avx2Kernels() {
#if defined(__AVX2__) && defined(__F16C__)
  static const KernelTable table = MakeKernelTable<avx2::Ops>();
  return table;
#else
  return ScalarKernels();  // not an x86 build: KernelsFor never selects this level
#endif
}

}  // namespace zero::cpu
