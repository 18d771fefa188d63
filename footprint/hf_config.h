// Hugging Face config.json files as models (--model=.../config.json): the
// common decoder families, read into a TransformerShape and built by
// BuildTransformer, so the parameter count is that of the model
// `transformers` builds from the same config (sum of p.numel(), a tied head
// counted once).
//
//   gpt2                       n_embd, n_layer, n_head, vocab_size,
//                              n_positions, n_inner (null: 4 x n_embd)
//   llama, mistral, qwen2,     hidden_size, num_hidden_layers,
//   phi3, gemma                num_attention_heads, intermediate_size,
//                              vocab_size; num_key_value_heads, head_dim,
//                              tie_word_embeddings, attention_bias, mlp_bias
//                              where the family has them (qwen2: q, k, v
//                              biases; phi3: fused qkv and gate-up; gemma:
//                              GeGLU, head_dim, tied)
//   mixtral                    + num_local_experts, num_experts_per_tok
//   qwen2_moe                  + num_experts, num_experts_per_tok,
//                              moe_intermediate_size,
//                              shared_expert_intermediate_size
//   gpt_neox                   + use_parallel_residual, attention_bias
//
// For --kernels=transformers (activations_hf.h) also the MLP's activation
// (activation_function, hidden_act), dropout (attn_pdrop, resid_pdrop,
// embd_pdrop, attention_dropout, hidden_dropout), sliding_window (Qwen2:
// with use_sliding_window) and Qwen2-MoE's norm_topk_prob; the family is
// model_type.
//
// Keys the family defaults in `transformers` may be absent; the others are
// required. Errors are one line, FILE:LINE:COL: an unsupported model_type
// (naming the supported ones), a missing key (naming it and the family), a
// value of the wrong kind or out of range.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "base/json.h"
#include "footprint/model.h"

namespace zero::footprint {

// Whether `root` is a Hugging Face config (an object with "model_type").
bool IsHfConfig(const json::Value& root);

// `file` names the source in errors and, as "DIR/config.json", gives the
// model its name (DIR's last component; else the file name).
absl::StatusOr<ModelSpec> ModelFromHfConfig(const json::Value& root, const std::string& file);

}  // namespace zero::footprint
