// The activations a transformer's training step creates, tensor by tensor:
// what each site (embedding, attention sub-layer, MLP sub-layer, head)
// allocates in forward, which of those autograd keeps for backward, and
// which it frees at once. The step script (step_script.h) allocates and
// frees them on the pool; this file only describes them. Pure functions.
//
// Two accountings (ActivationOptions::kernels):
//  - kTransformers: what the Hugging Face `transformers` classes of the
//    shape's family save (activations_hf.h; footprint/validate_transformers.py
//    checks it against them): fp32 norm copies, fp32 eager softmax, the
//    rotary outputs, Python-composite activations, with `attention` the
//    attn_implementation the user sets (eager, sdpa, flash).
//  - kFused: what autograd saves in a plain PyTorch implementation with
//    fused norms and the flash-attn layout (sdpa is flash here), below.
//
// kFused (footprint/README.md lists every tensor; footprint/
// validate_activations.py counts the same in PyTorch). With T = s*b
// tokens and B bytes per element:
//   norms keep their input (T*h*B) and per-token statistics in fp32
//     (LayerNorm mean and rstd: 8T bytes; RMSNorm rstd: 4T);
//   linears keep their input; GELU and SiLU their input; a product both
//     factors; dropout a 1-byte mask;
//   eager attention keeps q, k, v (repeated to every head when grouped),
//     the softmax output (a*s*s*b elements), with dropout its mask and
//     output, and the merged heads; flash attention keeps q, k, v (at the
//     KV width), its output (which the output projection reads as a view)
//     and the log-sum-exp (a*T fp32);
//   the head keeps the final norm's input and output and the fp32
//     log-softmax of the logits (T*vocab*4); the embedding its token ids.
// For GPT-2 (dropout, LayerNorm) this is Korthikanti et al. 2022's
// s*b*h*(34 + 5*a*s/h) per layer in 16-bit, plus the LayerNorms' 16T bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "footprint/model.h"
#include "footprint/transformer_shape.h"

namespace zero::footprint {

// What the model code is: fused kernels, or the `transformers` classes.
enum class Kernels { kFused, kTransformers };
// The attention implementation: eager (matrix products and a softmax),
// sdpa (torch's scaled_dot_product_attention, which picks a kernel) or
// flash (flash-attn). Under kFused, sdpa is flash's layout.
enum class Attention { kEager, kSdpa, kFlash };
enum class Checkpointing { kNone, kSelective, kFull };
// Whose kernel choices kTransformers follows: a card's (CUDA: sdpa runs
// flash or memory-efficient attention, dropout included; LayerNorm keeps
// fp32 mean and rstd; dropout masks are bool) or the CPU's (sdpa with
// dropout falls back to the math path, in fp32; LayerNorm statistics and
// dropout masks in the model's dtype), which validate_transformers.py
// measures against.
enum class Backend { kGpu, kCpu };

struct ActivationOptions {
  uint64_t seq = 1024, micro_batch = 1;
  Attention attention = Attention::kFlash;
  // Selective recomputes eager attention's softmax and dropout (flash
  // keeps none: the same as none); full keeps only each layer's input and
  // recomputes the layer in backward (transformers' gradient checkpointing).
  Checkpointing checkpointing = Checkpointing::kNone;
  uint64_t element_bytes = 2;  // of the model's dtype: 2 (bf16, fp16) or 4 (fp32)
  // The library's defaults; the command line's are transformers and sdpa
  // (options.h).
  Kernels kernels = Kernels::kFused;
  Backend backend = Backend::kGpu;
};

// InvalidArgument for options that cannot go together whatever the model:
// selective checkpointing with transformers kernels (transformers only
// recomputes whole layers). Fused kernels do not read `backend`.
absl::Status ValidateActivationOptions(const ActivationOptions& options);

struct ActTensor {
  std::string name;
  uint64_t bytes = 0;
  bool saved = true;  // kept for backward; else freed in forward (SiteActivations::drops)
  bool core = false;  // eager attention's softmax and dropout: selective checkpointing
                      // frees these in forward and recomputes them in backward
  bool grad = true;   // backward makes a gradient of its size (not masks, ids, statistics)
};

// One site's forward: tensors in creation order; drops[i] lists the
// transient tensors freed right after tensor i is created. A transient
// never dropped is freed at the end of the site.
struct SiteActivations {
  std::vector<ActTensor> tensors;
  std::vector<std::vector<int>> drops;
};

// InvalidArgument when a tensor would not fit the simulated device (a seq
// or micro-batch far too large), naming the tensor and its bytes; when the
// options are invalid (ValidateActivationOptions); with transformers
// kernels, for an MLP activation it does not model.
absl::StatusOr<SiteActivations> ActivationsOf(Site site, const TransformerShape& shape,
                                              const ActivationOptions& options);

// Whether the forward pass keeps tensor `index` of a `kind` site for
// backward under checkpointing `c` (full: of a layer, only the attention
// site's input, tensor 0).
bool KeptInForward(const SiteActivations& site, int index, Site kind, Checkpointing c);

// Bytes one layer keeps for backward (its attention and MLP sites, after
// checkpointing): what the step measures between layers.
absl::StatusOr<uint64_t> LayerSavedBytes(const TransformerShape& shape,
                                         const ActivationOptions& options);

// Korthikanti et al. 2022 (arXiv 2205.05198), per layer in 16-bit without
// tensor parallelism: s*b*h*(34 + 5*a*s/h) without recomputation, 34*s*b*h
// with selective recomputation, 2*s*b*h with full. Flash (and sdpa)
// attention keeps no score matrix, i.e. the selective figure.
double KorthikantiLayerBytes(const TransformerShape& shape, const ActivationOptions& options);

// The share of a step's FLOPs that checkpointing adds: a full layer's
// forward (full) or eager attention's score matrices (selective), over
// three forwards (forward + backward); 0 without recomputation.
double RecomputeFraction(const TransformerShape& shape, const ActivationOptions& options);

}  // namespace zero::footprint
