// The transformers accounting (ActivationOptions::kernels ==
// Kernels::kTransformers): the tensors that the Hugging Face `transformers`
// classes (5.x, torch 2.x) of the shape's family save for backward, for
// the attn_implementation the user sets (eager, sdpa, flash =
// flash_attention_2), as a card runs them (Backend::kGpu) or as the CPU
// does (Backend::kCpu). Internal to activations.cc, which calls it from
// ActivationsOf; the contract is ActivationsOf's (activations.h).
//
// What differs from the fused accounting, per layer (T tokens, B bytes):
//  - RMSNorm runs in fp32: it keeps x.float() (4T*h), rstd and the cast
//    normalized tensor, not its input; Gemma's keeps x.float() and
//    x*rstd (both fp32). LayerNorm keeps its input, mean and rstd (fp32 on
//    a card, B on the CPU) as the fused one does.
//  - Rotary positions make new q and k (torch.cat in Phi-3 and GPT-NeoX,
//    whose q and k then lie in (batch, heads, seq, dim) order, so sdpa's
//    output does too and the output projection reads a copy).
//  - eager: the matrix products keep copies of q, k, v (k and v repeated
//    to every head when grouped), the fp32 softmax and its cast (GPT-2:
//    one softmax in B), dropout's mask and output.
//  - sdpa on a card and flash keep q, k, v as given (views of a fused
//    projection keep all of it), the output and the fp32 log-sum-exp.
//    sdpa with a mask (a sliding window shorter than the sequence) or
//    head_dim > 256 repeats grouped k and v and keeps the mask.
//  - On the CPU, sdpa with attention dropout runs the math path: fp32
//    copies of q, k, v, the fp32 softmax, its fp32 mask and output.
//  - Composite activations keep their intermediates (gelu_new: input,
//    tanh, 1 + tanh, x/2; quick_gelu: input, sigmoid).
//  - Mixture of experts as transformers' default grouped_mm experts: the
//    router's fp32 softmax, top-k indices, sort permutations and offsets,
//    gathered inputs, the fused gate-up output, act, product, weights and
//    the down projection's output per routed token.
#pragma once

#include "absl/status/statusor.h"
#include "footprint/activations.h"
#include "footprint/model.h"
#include "footprint/transformer_shape.h"

namespace zero::footprint {

absl::StatusOr<SiteActivations> TransformersActivationsOf(Site site, const TransformerShape& shape,
                                                          const ActivationOptions& options);

}  // namespace zero::footprint
