// Dense math shared by the test models.
//
// Plain loops in a fixed order on one thread, with no reassociation (the
// library builds with -ffp-contract=off and never with -ffast-math), so a
// result depends only on the inputs. Every kernel is a template so the same
// code runs in double for the gradient checks; float and double are
// instantiated in kernels.cc.
//
// Matrices are row-major. A weight is [out, in] as in torch: y = x W^T + b.
// Backward kernels overwrite their outputs (each parameter is used once per
// pass, so there is nothing to accumulate).
#pragma once

#include <span>

namespace zero::testing_model {

enum class Activation { kRelu, kGelu };  // GELU: the tanh approximation

struct LinearShape {
  int rows = 0;
  int in = 0;
  int out = 0;
};

// y[rows, out] = x[rows, in] W[out, in]^T + b[out].
template <typename T>
void Linear(const LinearShape& s, std::span<const T> x, std::span<const T> w, std::span<const T> b,
            std::span<T> y);

// dx may be empty when the input needs no gradient (the first layer).
template <typename T>
void LinearBackward(const LinearShape& s, std::span<const T> x, std::span<const T> w,
                    std::span<const T> dy, std::span<T> dx, std::span<T> dw, std::span<T> db);

// Per-row LayerNorm over `dim`; keeps mean and 1/stddev per row for backward.
template <typename T>
void LayerNorm(int rows, int dim, std::span<const T> x, std::span<const T> gamma,
               std::span<const T> beta, std::span<T> y, std::span<T> mean, std::span<T> rstd);

template <typename T>
void LayerNormBackward(int rows, int dim, std::span<const T> x, std::span<const T> gamma,
                       std::span<const T> mean, std::span<const T> rstd, std::span<const T> dy,
                       std::span<T> dx, std::span<T> dgamma, std::span<T> dbeta);

// Elementwise; backward takes the activation's input.
template <typename T>
void Activate(Activation act, std::span<const T> x, std::span<T> y);
template <typename T>
void ActivateBackward(Activation act, std::span<const T> x, std::span<const T> dy, std::span<T> dx);

// Multi-head self-attention over packed [q | k | v] projections.
struct AttentionShape {
  int rows = 0;  // sequences
  int seq = 0;
  int heads = 0;
  int head_dim = 0;
  bool causal = true;
  int hidden() const { return heads * head_dim; }
};

// qkv [rows*seq, 3*hidden] -> out [rows*seq, hidden]. probs
// [rows, heads, seq, seq] keeps the softmax for backward (0 where masked).
template <typename T>
void Attention(const AttentionShape& s, std::span<const T> qkv, std::span<T> probs,
               std::span<T> out);

template <typename T>
void AttentionBackward(const AttentionShape& s, std::span<const T> qkv, std::span<const T> probs,
                       std::span<const T> dout, std::span<T> dqkv);

// Mean over all elements of (y - target)^2; writes its gradient to dy.
template <typename T>
T MseLoss(std::span<const T> y, std::span<const T> target, std::span<T> dy);

template <typename T>
void AddTo(std::span<T> dst, std::span<const T> src);

}  // namespace zero::testing_model
