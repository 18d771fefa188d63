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
// The `transformers` class a shape is built like (its model_type): what
// --kernels=transformers follows (activations_hf.h). Presets: GPT-2's shape
// is kGpt2, Llama's kLlama, Mixtral's kMixtral.
enum class Family { kGpt2, kLlama, kMistral, kQwen2, kPhi3, kGemma, kMixtral, kQwen2Moe, kGptNeox };
// The MLP's activation as transformers computes it (ACT2FN[hidden_act]):
// kGelu is torch's fused GELU (gelu, gelu_pytorch_tanh), kGeluNew the
// composite tanh formula written in Python (gelu_new: GPT-2), kOther one
// that --kernels=transformers does not model.
enum class HiddenAct { kSilu, kGelu, kGeluNew, kQuickGelu, kRelu, kOther };

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
  // What only --kernels=transformers reads (the fused accounting reads
  // `dropout` above). Dropout probabilities above zero: of the attention
  // probabilities, of each sub-layer's output, of the embeddings.
  Family family = Family::kLlama;
  HiddenAct act = HiddenAct::kSilu;
  bool attention_dropout = false, residual_dropout = false, embedding_dropout = false;
  bool norm_topk = true;        // MoE: top-k weights renormalized (Qwen2-MoE: norm_topk_prob)
  uint64_t sliding_window = 0;  // keys further back than this are masked (0: none)

  uint64_t q_width() const { return heads * head_dim; }
  uint64_t kv_width() const { return kv_heads * head_dim; }
  bool moe() const { return experts > 0; }
};

}  // namespace zero::footprint
