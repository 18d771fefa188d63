// The shape of a decoder-only transformer, as much of it as parameter counts
// and activation bytes depend on. Presets (presets.cc) and Hugging Face
// config.json files (hf_config.h) describe models this way; BuildTransformer
// (transformer.h) turns a shape into the modules the engine fetches.
// A plain value: no ownership, no threads.
#pragma once

#include <cstdint>

namespace zero::footprint {

enum class NormKind { kLayerNorm, kRmsNorm };
// kPlain: up, activation, down (GPT-2, GPT-NeoX); kGated: gate and up, act(gate)
// * up, down (SwiGLU, GeGLU: Llama, Mistral, Gemma, Mixtral's experts).
enum class MlpKind { kPlain, kGated };

struct TransformerShape {
  uint64_t layers = 0, hidden = 0, heads = 0;
  uint64_t kv_heads = 0;  // grouped-query attention; = heads without it
  uint64_t head_dim = 0;  // queries are heads * head_dim wide (Gemma's is not hidden)
  uint64_t intermediate = 0, vocab = 0;
  uint64_t positions = 0;  // learned position embeddings (GPT-2's wpe); 0: rotary
  NormKind norm = NormKind::kRmsNorm;
  bool norm_bias = false;
  MlpKind mlp = MlpKind::kGated;
  bool qkv_bias = false, out_bias = false, mlp_bias = false;
  bool fused_qkv = false;      // one query-key-value projection (names only)
  bool fused_gate_up = false;  // one gate-up projection (names only)
  bool tied_embeddings = false;
  bool dropout = false;            // dropout after attention probabilities and sub-layers
  bool parallel_residual = false;  // GPT-NeoX: attention and MLP read the same input
  // Mixture of experts in every layer (experts > 0): a router over `experts`
  // gated MLPs of `expert_intermediate`, `top_k` per token, plus a shared
  // gated MLP of `shared_intermediate` (0: none) with a one-output gate.
  uint64_t experts = 0, top_k = 0, expert_intermediate = 0, shared_intermediate = 0;

  uint64_t q_width() const { return heads * head_dim; }
  uint64_t kv_width() const { return kv_heads * head_dim; }
  bool moe() const { return experts > 0; }
};

}  // namespace zero::footprint
