// The ZeRO paper's model states of one rank (arXiv 1910.02054, section 3 and
// Table 1), in bytes: what the footprint experiment and zero.memory_summary
// print beside what they measure. Plain numbers in, bytes out; no state.
//
// With Ψ parameters (padded as the layout pads them), N ranks, p bytes per
// parameter and g per gradient in the model's dtype, and K bytes of optimizer
// state per element (everything the optimizer keeps: fp32 master weights
// when the model is not fp32, plus its moments: Adam 8, SGD with momentum 4,
// plain SGD 0), the device holds
//   stage 0: pΨ + gΨ + KΨ        stage 1: pΨ + gΨ + KΨ/N
//   stage 2: pΨ + (g + K)Ψ/N     stage 3: (p + g + K)Ψ/N
// so mixed-precision Adam (2, 2, 12) is the paper's 16Ψ, 4Ψ + 12Ψ/N,
// 2Ψ + 14Ψ/N and 16Ψ/N. Stage 1 with gradient accumulation and no offload
// adds gΨ/N: the micro-batches' reduced shards accumulate in a buffer of
// their own while the whole gradient buffer takes the next micro-batch.
//
// With offload (ZeRO-Offload, arXiv 2101.06840: fp32 master, moments and
// fp32 gradients live on the host, where the step runs) the host holds
// (4 + moments + 4)Ψ/N (stage 0: Ψ, not Ψ/N), the device keeps the
// parameters (stage 3: pΨ/N, or none with parameter offload, whose pieces
// join the host's) and, at stages 0-1, the whole gradient gΨ (from stage 2
// the reduced gradients go to the host). With the optimizer on NVMe
// (ZeRO-Infinity) master and moments move from the host to the rank's file:
// nvme = (4 + moments)Ψ/N, and the host keeps the fp32 gradients.
#pragma once

namespace zero {

struct ModelStateInput {
  double psi = 0;               // Ψ
  int ranks = 1;                // N
  int stage = 0;                // 0 to 3
  double param_bytes = 2;       // p
  double grad_bytes = 2;        // g
  double optimizer_bytes = 12;  // K: moments, plus 4 for fp32 master weights when p < 4
  bool offload_optimizer = false;   // master, moments and fp32 gradients on the host
  bool offload_parameters = false;  // stage 3 with offload_optimizer: parameter pieces too
  bool nvme = false;                // with offload_optimizer: master and moments in a file
  int accumulation = 1;             // micro-batches per step (gradient accumulation)
};

struct ModelStateBytes {
  double params = 0, grads = 0, optimizer = 0;  // on the device
  double host = 0;                              // pinned host memory (offload)
  double nvme = 0;                              // the rank's NVMe file (ZeRO-Infinity)
  double device() const { return params + grads + optimizer; }
};

ModelStateBytes ModelStateFormula(const ModelStateInput& in);

}  // namespace zero
