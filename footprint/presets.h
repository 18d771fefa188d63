// Named models with their real shapes, built by BuildTransformer
// (transformer.h) except DeepSeek-V3, so all but it carry a transformer
// shape and get activations.
//
//   gpt2-small/-medium/-large/-xl  GPT-2 (vocab 50257, context 1024; biases,
//       LayerNorms, learned position embeddings, output tied to the token
//       embedding, which is therefore used first and last): 124,439,808 /
//       354,823,168 / 774,030,080 / 1,557,611,200 parameters.
//   zero-1.5b, zero-7.5b, zero-100b  the ZeRO paper's GPT-2-like models
//       (arXiv 1910.02054): 1.5B is 48 layers of hidden 1600 (GPT-2 XL's
//       shape); 100B is 125 layers of hidden 8192 (its Table of
//       configurations). Table 1's 7.5B is a figure without a shape: 80
//       layers of hidden 2768 give Ψ = 7,500,181,104, the GPT-2 shape
//       closest above 7.5e9, so the measured bytes round to Table 1's
//       120 / 31.4 / 16.6 / 1.88 GB at N = 64.
//   llama2-7b/-13b/-70b  Llama 2 (vocab 32000; RMSNorm without bias,
//       SwiGLU MLP, no biases, untied output head; 70B uses grouped-query
//       attention with 8 KV heads): 6,738,415,616 / 13,015,864,320 /
//       68,976,648,192 parameters.
//   llama3-8b/-70b  Llama 3 (vocab 128256, 8 KV heads): 8,030,261,248 /
//       70,553,706,496 parameters.
//   mixtral-8x7b  Mistral 7B's attention with 8 SwiGLU experts of 14336,
//       top 2, in every layer: 46,702,792,704 parameters; a module per
//       expert and one for the router.
//   The GPT-2 shapes' heads: 12, 16, 20, 25 (head dim 64); the ZeRO paper
//   gives none for its models: zero-1.5b 25 (GPT-2 XL's), zero-7.5b 16
//   (2768 has no divisor near 64 heads of 64), zero-100b 64 (of 128).
//   deepseek-v3  DeepSeek-V3's mixture of experts (61 layers, 256 routed +
//       1 shared expert in 58 of them, MLA attention; no multi-token
//       prediction module): 671,026,419,200 parameters in 44,843 modules
//       (one per expert projection).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "footprint/model.h"

namespace zero::footprint {

// GPT-2's shape at any size (the gpt2-* and zero-* presets): LayerNorms and
// projections with biases, a fused query-key-value projection, a GELU MLP
// of 4 x hidden, 1024 learned positions, dropout, the head tied to the
// token embedding; heads of hidden / heads (a divisor).
TransformerShape GptShape(uint64_t layers, uint64_t hidden, uint64_t heads);

// nullopt for an unknown name.
std::optional<ModelSpec> Preset(std::string_view name);
std::vector<std::string> PresetNames();

}  // namespace zero::footprint
