// A small pre-LayerNorm transformer against a fixed random teacher.
//
// Each block is two residual branches, x + Attn(LN1(x)) and then
// x + MLP(LN2(x)), split into four modules (ln1, attn, ln2, mlp) so the
// engine's per-module hooks see the granularity a real model has. The
// residual add belongs to the module of its branch.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tests/model/kernels.h"
#include "tests/model/model.h"
#include "tests/model/network.h"

namespace zero::testing_model {
namespace {

using internal::DenseLayer;
using internal::NormLayer;
using internal::NormTape;
using internal::Pass;

constexpr uint64_t kTeacherSeed = 0x7eac4e13;
constexpr uint64_t kInputSalt = 1;
constexpr int kModulesPerBlock = 4;
constexpr int kMlpWidth = 4;  // fc1 widens hidden by this, as in GPT

enum class Kind { kEmbed, kLn1, kAttn, kLn2, kMlp, kHead };
struct Part {
  Kind kind;
  int block = 0;
};

struct Block {
  NormLayer ln1;
  DenseLayer qkv, proj;
  NormLayer ln2;
  DenseLayer fc1, fc2;
};

// What forward keeps for backward in one block.
template <typename T>
struct BlockTape {
  NormTape<T> ln1, ln2;
  std::vector<T> qkv, probs, ctx;
  std::vector<T> mid;       // the stream between the two branches
  std::vector<T> pre, act;  // the MLP's wide hidden layer, before and after the activation
};

template <typename T>
struct Tape {
  int rows = 0;    // sequences
  int tokens = 0;  // rows * seq
  std::vector<T> input, target;
  std::vector<std::vector<T>> streams;  // [b]: into block b; [blocks]: into the head
  std::vector<BlockTape<T>> blocks;
  std::vector<T> y, dy;
  // Backward: the gradient of the stream at the current point, of the branch
  // input (LN output) handed from a branch module to its LN, and scratch.
  std::vector<T> dstream, dbranch, dscratch, dwide;
};

// y = layer(x) + stream: a residual branch's last projection.
template <typename T>
absl::Status ResidualForward(const DenseLayer& layer, const Pass<T>& pass, int rows,
                             std::span<const T> x, std::span<const T> stream, std::vector<T>& y) {
  y.resize(stream.size());
  RETURN_IF_ERROR(layer.Forward<T>(pass, rows, x, y));
  AddTo<T>(y, stream);
  return absl::OkStatus();
}

class TransformerModel final : public internal::NetworkModelOf<TransformerModel> {
 public:
  explicit TransformerModel(const TransformerConfig& c) : c_(c) {
    AddModule("embed");
    embed_ = AddDense("embed", c.features, c.hidden);
    pos_ = AddParam("embed.pos", {c.seq, c.hidden}, {internal::InitRule::kUniform, 0.1});
    for (int b = 0; b < c.layers; ++b) blocks_.push_back(AddBlock(absl::StrCat("layer", b)));
    AddModule("head");
    head_ = AddDense("head", c.hidden, c.features);
    const size_t square = static_cast<size_t>(c.features) * c.features;
    const double gain = 2.0 / std::sqrt(static_cast<double>(c.features));
    teacher_now_ = internal::UniformValues(kTeacherSeed, square, gain);
    teacher_past_ = internal::UniformValues(MixSeed(kTeacherSeed, 1), square, gain);
  }

  Batch MakeBatch(uint64_t seed) const override;

  template <typename T>
  absl::StatusOr<T> Run(Pass<T>& pass, const Batch& batch) const {
    const size_t width = static_cast<size_t>(c_.seq) * c_.features;
    RETURN_IF_ERROR(CheckBatch(batch, width, width));
    Tape<T> tape;
    tape.rows = batch.rows;
    tape.tokens = batch.rows * c_.seq;
    tape.input.assign(batch.inputs.begin(), batch.inputs.end());
    tape.target.assign(batch.targets.begin(), batch.targets.end());
    tape.streams.resize(blocks_.size() + 1);
    tape.blocks.resize(blocks_.size());
    auto forward = [&](int m) { return Forward(pass, tape, m); };
    auto loss = [&]() -> absl::StatusOr<T> {
      tape.dy.resize(tape.y.size());
      return MseLoss<T>(tape.y, tape.target, tape.dy);
    };
    auto backward = [&](int m) { return Backward(pass, tape, m); };
    return pass.Run(forward, loss, backward);
  }

 private:
  Block AddBlock(const std::string& name) {
    const int h = c_.hidden;
    Block b;
    AddModule(name + ".ln1");
    b.ln1 = AddNorm(name + ".ln1", h);
    AddModule(name + ".attn");
    b.qkv = AddDense(name + ".attn.qkv", h, 3 * h);
    b.proj = AddDense(name + ".attn.proj", h, h);
    AddModule(name + ".ln2");
    b.ln2 = AddNorm(name + ".ln2", h);
    AddModule(name + ".mlp");
    b.fc1 = AddDense(name + ".mlp.fc1", h, kMlpWidth * h);
    b.fc2 = AddDense(name + ".mlp.fc2", kMlpWidth * h, h);
    return b;
  }

  Part Decode(int module) const {
    if (module == 0) return {Kind::kEmbed};
    const int b = (module - 1) / kModulesPerBlock;
    if (b == c_.layers) return {Kind::kHead};
    const Kind kinds[] = {Kind::kLn1, Kind::kAttn, Kind::kLn2, Kind::kMlp};
    return {kinds[(module - 1) % kModulesPerBlock], b};
  }

  AttentionShape Shape(int rows) const {
    return {rows, c_.seq, c_.heads, c_.hidden / c_.heads, c_.causal};
  }

  template <typename T>
  absl::Status Forward(const Pass<T>& pass, Tape<T>& tape, int module) const;
  template <typename T>
  absl::Status Backward(Pass<T>& pass, Tape<T>& tape, int module) const;
  template <typename T>
  absl::Status EmbedForward(const Pass<T>& pass, Tape<T>& tape) const;
  template <typename T>
  absl::Status EmbedBackward(Pass<T>& pass, Tape<T>& tape) const;
  template <typename T>
  absl::Status AttnBackward(Pass<T>& pass, Tape<T>& tape, int b) const;
  template <typename T>
  absl::Status MlpBackward(Pass<T>& pass, Tape<T>& tape, int b) const;

  TransformerConfig c_;
  DenseLayer embed_;
  int pos_ = -1;
  std::vector<Block> blocks_;
  DenseLayer head_;
  std::vector<float> teacher_now_, teacher_past_;  // [features, features]
};

// Inputs uniform in [-1, 1); each target token is
// tanh(A x_t + B mean(x_0..x_t)), so it needs attention over the past.
Batch TransformerModel::MakeBatch(uint64_t seed) const {
  const int tokens = c_.rows * c_.seq, f = c_.features;
  const size_t size = static_cast<size_t>(tokens) * f;
  Batch batch;
  batch.rows = c_.rows;
  batch.inputs = internal::UniformValues(MixSeed(seed, kInputSalt), size, 1.0);
  std::vector<float> past(size);
  for (int r = 0; r < c_.rows; ++r) {
    std::vector<float> sum(f, 0.0f);
    for (int t = 0; t < c_.seq; ++t) {
      const size_t at = (static_cast<size_t>(r) * c_.seq + t) * f;
      for (int i = 0; i < f; ++i) {
        sum[i] += batch.inputs[at + i];
        past[at + i] = sum[i] / static_cast<float>(t + 1);
      }
    }
  }
  const std::vector<float> no_bias(f, 0.0f);
  std::vector<float> from_past(size);
  batch.targets.resize(size);
  Linear<float>({tokens, f, f}, batch.inputs, teacher_now_, no_bias, batch.targets);
  Linear<float>({tokens, f, f}, past, teacher_past_, no_bias, from_past);
  AddTo<float>(batch.targets, from_past);
  for (float& t : batch.targets) t = std::tanh(t);
  return batch;
}

template <typename T>
absl::Status TransformerModel::Forward(const Pass<T>& pass, Tape<T>& tape, int module) const {
  const Part part = Decode(module);
  if (part.kind == Kind::kEmbed) return EmbedForward(pass, tape);
  if (part.kind == Kind::kHead) {
    tape.y.resize(tape.target.size());
    return head_.Forward<T>(pass, tape.tokens, tape.streams.back(), tape.y);
  }
  const Block& b = blocks_[part.block];
  BlockTape<T>& bt = tape.blocks[part.block];
  const std::vector<T>& in = tape.streams[part.block];
  const int n = tape.tokens, h = c_.hidden;
  switch (part.kind) {
    case Kind::kLn1:
      return b.ln1.Forward<T>(pass, n, in, bt.ln1);
    case Kind::kAttn:
      bt.qkv.resize(static_cast<size_t>(n) * 3 * h);
      RETURN_IF_ERROR(b.qkv.Forward<T>(pass, n, bt.ln1.y, bt.qkv));
      bt.probs.resize(static_cast<size_t>(tape.rows) * c_.heads * c_.seq * c_.seq);
      bt.ctx.resize(static_cast<size_t>(n) * h);
      Attention<T>(Shape(tape.rows), bt.qkv, bt.probs, bt.ctx);
      return ResidualForward<T>(b.proj, pass, n, bt.ctx, in, bt.mid);
    case Kind::kLn2:
      return b.ln2.Forward<T>(pass, n, bt.mid, bt.ln2);
    default:  // kMlp
      bt.pre.resize(static_cast<size_t>(n) * kMlpWidth * h);
      bt.act.resize(bt.pre.size());
      RETURN_IF_ERROR(b.fc1.Forward<T>(pass, n, bt.ln2.y, bt.pre));
      Activate<T>(c_.activation, bt.pre, bt.act);
      return ResidualForward<T>(b.fc2, pass, n, bt.act, bt.mid, tape.streams[part.block + 1]);
  }
}

template <typename T>
absl::Status TransformerModel::EmbedForward(const Pass<T>& pass, Tape<T>& tape) const {
  std::vector<T>& x = tape.streams[0];
  x.resize(static_cast<size_t>(tape.tokens) * c_.hidden);
  RETURN_IF_ERROR(embed_.Forward<T>(pass, tape.tokens, tape.input, x));
  ASSIGN_OR_RETURN(std::span<const T> pos, pass.Param(pos_));
  const size_t per_row = pos.size();
  for (size_t i = 0; i < x.size(); ++i) x[i] += pos[i % per_row];
  return absl::OkStatus();
}

template <typename T>
absl::Status TransformerModel::Backward(Pass<T>& pass, Tape<T>& tape, int module) const {
  const Part part = Decode(module);
  const size_t stream_size = static_cast<size_t>(tape.tokens) * c_.hidden;
  tape.dscratch.resize(stream_size);
  switch (part.kind) {
    case Kind::kHead:
      tape.dstream.resize(stream_size);
      return head_.Backward<T>(pass, tape.tokens, tape.streams.back(), tape.dy, tape.dstream);
    case Kind::kMlp:
      return MlpBackward(pass, tape, part.block);
    case Kind::kAttn:
      return AttnBackward(pass, tape, part.block);
    case Kind::kEmbed:
      return EmbedBackward(pass, tape);
    default:  // kLn1, kLn2: the branch's gradient joins the residual one
      break;
  }
  const Block& b = blocks_[part.block];
  const BlockTape<T>& bt = tape.blocks[part.block];
  const bool first = part.kind == Kind::kLn1;
  const NormLayer& norm = first ? b.ln1 : b.ln2;
  const std::vector<T>& in = first ? tape.streams[part.block] : bt.mid;
  const NormTape<T>& saved = first ? bt.ln1 : bt.ln2;
  RETURN_IF_ERROR(norm.Backward<T>(pass, tape.tokens, in, saved, tape.dbranch, tape.dscratch));
  AddTo<T>(tape.dstream, tape.dscratch);
  return absl::OkStatus();
}

template <typename T>
absl::Status TransformerModel::MlpBackward(Pass<T>& pass, Tape<T>& tape, int b) const {
  const BlockTape<T>& bt = tape.blocks[b];
  tape.dwide.resize(bt.act.size());
  tape.dbranch.resize(tape.dstream.size());
  RETURN_IF_ERROR(blocks_[b].fc2.Backward<T>(pass, tape.tokens, bt.act, tape.dstream, tape.dwide));
  ActivateBackward<T>(c_.activation, bt.pre, tape.dwide, tape.dwide);  // elementwise: in place
  return blocks_[b].fc1.Backward<T>(pass, tape.tokens, bt.ln2.y, tape.dwide, tape.dbranch);
}

template <typename T>
absl::Status TransformerModel::AttnBackward(Pass<T>& pass, Tape<T>& tape, int b) const {
  const BlockTape<T>& bt = tape.blocks[b];
  std::vector<T>& dctx = tape.dscratch;
  RETURN_IF_ERROR(blocks_[b].proj.Backward<T>(pass, tape.tokens, bt.ctx, tape.dstream, dctx));
  tape.dwide.resize(bt.qkv.size());
  AttentionBackward<T>(Shape(tape.rows), bt.qkv, bt.probs, dctx, tape.dwide);
  return blocks_[b].qkv.Backward<T>(pass, tape.tokens, bt.ln1.y, tape.dwide, tape.dbranch);
}

template <typename T>
absl::Status TransformerModel::EmbedBackward(Pass<T>& pass, Tape<T>& tape) const {
  std::span<T> dpos = pass.Grad(pos_);
  // Rows in order, so each position's sum runs the same way every time.
  for (size_t i = 0; i < tape.dstream.size(); ++i) dpos[i % dpos.size()] += tape.dstream[i];
  return embed_.Backward<T>(pass, tape.tokens, tape.input, tape.dstream, {});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeTransformer(const TransformerConfig& c) {
  if (c.layers < 0 || c.hidden <= 0 || c.heads <= 0 || c.seq <= 0 || c.rows <= 0 ||
      c.features <= 0 || c.hidden % c.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MakeTransformer: need positive sizes and hidden divisible by heads; got layers=", c.layers,
        " hidden=", c.hidden, " heads=", c.heads, " seq=", c.seq, " rows=", c.rows,
        " features=", c.features));
  }
  return std::make_unique<TransformerModel>(c);
}

absl::StatusOr<std::unique_ptr<Model>> MakeTransformer(int layers, int hidden, int heads, int seq,
                                                       int rows) {
  return MakeTransformer(TransformerConfig{.layers = layers,
                                           .hidden = hidden,
                                           .heads = heads,
                                           .seq = seq,
                                           .rows = rows,
                                           .features = hidden});
}

}  // namespace zero::testing_model
