// A decoder-only transformer's modules from its shape, written once for the
// presets and for Hugging Face configs. Each sub-layer (norm + attention,
// norm + MLP) is one module, i.e. one stage-3 fetch unit; with experts, the
// router (with the norm) and each expert are modules. The embeddings, the
// final norm and an untied head are modules of their own; a tied head uses
// the token embedding again. Every forward use carries its site, and the
// model its shape, so the experiment can create activations.
//
// Names follow Hugging Face's layouts: GPT-2's (wte, wpe, h.i, ln_f,
// attn.c_attn) when `gpt2_names`, else Llama's (embed_tokens, layers.i,
// self_attn.q_proj or qkv_proj, mlp.gate_proj or gate_up_proj, norm, lm_head).
#pragma once

#include <string>

#include "footprint/model.h"
#include "footprint/transformer_shape.h"

namespace zero::footprint {

// The shape is taken as it is: hf_config.cc and the presets check theirs.
ModelSpec BuildTransformer(std::string name, const TransformerShape& shape,
                           bool gpt2_names = false);

}  // namespace zero::footprint
