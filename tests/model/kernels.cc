#include "tests/model/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace zero::testing_model {
namespace {

constexpr double kLayerNormEps = 1e-5;
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;

// Offsets of head h's slice for token t of sequence r, in the packed
// [q | k | v] rows, the attention output, and the saved softmax.
struct QkvIndex {
  const AttentionShape& s;
  size_t q(int r, int t, int h) const {
    return (static_cast<size_t>(r) * s.seq + t) * 3 * s.hidden() +
           static_cast<size_t>(h) * s.head_dim;
  }
  size_t k(int r, int t, int h) const { return q(r, t, h) + s.hidden(); }
  size_t v(int r, int t, int h) const { return q(r, t, h) + 2 * s.hidden(); }
  size_t out(int r, int t, int h) const {
    return (static_cast<size_t>(r) * s.seq + t) * s.hidden() + static_cast<size_t>(h) * s.head_dim;
  }
  size_t probs(int r, int h, int i) const {
    return ((static_cast<size_t>(r) * s.heads + h) * s.seq + i) * s.seq;
  }
  // Keys a query may see: all of them, or up to itself when causal.
  int visible(int i) const { return s.causal ? i + 1 : s.seq; }
};

// tanh(c (v + a v^3)) for GELU. Through exp rather than std::tanh: glibc's
// tanhf goes through expm1f, which made it a quarter of the transformer's
// time. Saturates cleanly: exp overflowing to inf gives 1, underflowing gives -1.
template <typename T>
T GeluTanh(T v) {
  const T z = static_cast<T>(kGeluC) * (v + static_cast<T>(kGeluA) * v * v * v);
  return T(1) - T(2) / (std::exp(T(2) * z) + T(1));
}

// y += a x. Every y[i] is its own sum, so the compiler may vectorize this
// without reordering anything; __restrict spares it a run-time overlap check
// (callers never pass overlapping rows).
template <typename T>
void Axpy(int n, T a, const T* __restrict x, T* __restrict y) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

template <typename T>
T Dot(const T* a, const T* b, int n) {
  T acc = 0;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// One query row of softmax(q k^T / sqrt(d)), masked entries left 0.
template <typename T>
void SoftmaxRow(const QkvIndex& ix, std::span<const T> qkv, int r, int h, int i, T* p) {
  const T scale = T(1) / std::sqrt(static_cast<T>(ix.s.head_dim));
  const int n = ix.visible(i);
  T max = -std::numeric_limits<T>::infinity();
  for (int j = 0; j < n; ++j) {
    p[j] = Dot(&qkv[ix.q(r, i, h)], &qkv[ix.k(r, j, h)], ix.s.head_dim) * scale;
    max = std::max(max, p[j]);
  }
  T sum = 0;
  for (int j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - max);
    sum += p[j];
  }
  for (int j = 0; j < n; ++j) p[j] /= sum;
  for (int j = n; j < ix.s.seq; ++j) p[j] = 0;
}

}  // namespace

// Each y[r, o] is b[o] + (sum over i in order of x[r, i] w[o, i]), as a plain
// dot product would give, but the loop runs over o innermost on W^T: the
// outputs are independent, so the compiler can vectorize without reordering
// any sum (a single dot product's sum is a chain it may not reorder).
template <typename T>
void Linear(const LinearShape& s, std::span<const T> x, std::span<const T> w, std::span<const T> b,
            std::span<T> y) {
  std::vector<T> wt(static_cast<size_t>(s.in) * s.out);
  for (int o = 0; o < s.out; ++o) {
    for (int i = 0; i < s.in; ++i) {
      wt[static_cast<size_t>(i) * s.out + o] = w[static_cast<size_t>(o) * s.in + i];
    }
  }
  for (int r = 0; r < s.rows; ++r) {
    const T* xr = &x[static_cast<size_t>(r) * s.in];
    T* yr = &y[static_cast<size_t>(r) * s.out];
    std::fill(yr, yr + s.out, T(0));
    for (int i = 0; i < s.in; ++i) Axpy(s.out, xr[i], &wt[static_cast<size_t>(i) * s.out], yr);
    for (int o = 0; o < s.out; ++o) yr[o] = b[o] + yr[o];
  }
}

template <typename T>
void LinearBackward(const LinearShape& s, std::span<const T> x, std::span<const T> w,
                    std::span<const T> dy, std::span<T> dx, std::span<T> dw, std::span<T> db) {
  std::fill(dw.begin(), dw.end(), T(0));
  std::fill(db.begin(), db.end(), T(0));
  if (!dx.empty()) std::fill(dx.begin(), dx.end(), T(0));
  for (int r = 0; r < s.rows; ++r) {
    const T* xr = &x[static_cast<size_t>(r) * s.in];
    for (int o = 0; o < s.out; ++o) {
      const T g = dy[static_cast<size_t>(r) * s.out + o];
      db[o] += g;
      Axpy(s.in, g, xr, &dw[static_cast<size_t>(o) * s.in]);
      if (dx.empty()) continue;
      Axpy(s.in, g, &w[static_cast<size_t>(o) * s.in], &dx[static_cast<size_t>(r) * s.in]);
    }
  }
}

template <typename T>
void LayerNorm(int rows, int dim, std::span<const T> x, std::span<const T> gamma,
               std::span<const T> beta, std::span<T> y, std::span<T> mean, std::span<T> rstd) {
  for (int r = 0; r < rows; ++r) {
    const T* xr = &x[static_cast<size_t>(r) * dim];
    T sum = 0;
    for (int c = 0; c < dim; ++c) sum += xr[c];
    const T mu = sum / static_cast<T>(dim);
    T var = 0;
    for (int c = 0; c < dim; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= static_cast<T>(dim);
    const T rs = T(1) / std::sqrt(var + static_cast<T>(kLayerNormEps));
    mean[r] = mu;
    rstd[r] = rs;
    for (int c = 0; c < dim; ++c) {
      y[static_cast<size_t>(r) * dim + c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    }
  }
}

template <typename T>
void LayerNormBackward(int rows, int dim, std::span<const T> x, std::span<const T> gamma,
                       std::span<const T> mean, std::span<const T> rstd, std::span<const T> dy,
                       std::span<T> dx, std::span<T> dgamma, std::span<T> dbeta) {
  std::fill(dgamma.begin(), dgamma.end(), T(0));
  std::fill(dbeta.begin(), dbeta.end(), T(0));
  for (int r = 0; r < rows; ++r) {
    const size_t at = static_cast<size_t>(r) * dim;
    T sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int c = 0; c < dim; ++c) {
      const T xhat = (x[at + c] - mean[r]) * rstd[r];
      const T dxhat = dy[at + c] * gamma[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      dgamma[c] += dy[at + c] * xhat;
      dbeta[c] += dy[at + c];
    }
    const T n = static_cast<T>(dim);
    for (int c = 0; c < dim; ++c) {
      const T xhat = (x[at + c] - mean[r]) * rstd[r];
      const T dxhat = dy[at + c] * gamma[c];
      dx[at + c] = rstd[r] * (dxhat - sum_dxhat / n - xhat * (sum_dxhat_xhat / n));
    }
  }
}

template <typename T>
void Activate(Activation act, std::span<const T> x, std::span<T> y) {
  for (size_t i = 0; i < x.size(); ++i) {
    const T v = x[i];
    y[i] = act == Activation::kRelu ? (v > 0 ? v : T(0)) : T(0.5) * v * (T(1) + GeluTanh(v));
  }
}

template <typename T>
void ActivateBackward(Activation act, std::span<const T> x, std::span<const T> dy,
                      std::span<T> dx) {
  const T c = static_cast<T>(kGeluC), a = static_cast<T>(kGeluA);
  for (size_t i = 0; i < x.size(); ++i) {
    const T v = x[i];
    if (act == Activation::kRelu) {
      dx[i] = v > 0 ? dy[i] : T(0);
      continue;
    }
    const T t = GeluTanh(v);
    const T slope =
        T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * c * (T(1) + T(3) * a * v * v);
    dx[i] = dy[i] * slope;
  }
}

template <typename T>
void Attention(const AttentionShape& s, std::span<const T> qkv, std::span<T> probs,
               std::span<T> out) {
  const QkvIndex ix{s};
  for (int r = 0; r < s.rows; ++r) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < s.seq; ++i) {
        T* p = &probs[ix.probs(r, h, i)];
        SoftmaxRow(ix, qkv, r, h, i, p);
        T* o = &out[ix.out(r, i, h)];
        std::fill(o, o + s.head_dim, T(0));
        for (int j = 0; j < ix.visible(i); ++j) Axpy(s.head_dim, p[j], &qkv[ix.v(r, j, h)], o);
      }
    }
  }
}

template <typename T>
void AttentionBackward(const AttentionShape& s, std::span<const T> qkv, std::span<const T> probs,
                       std::span<const T> dout, std::span<T> dqkv) {
  const QkvIndex ix{s};
  const T scale = T(1) / std::sqrt(static_cast<T>(s.head_dim));
  std::fill(dqkv.begin(), dqkv.end(), T(0));
  std::vector<T> dp(s.seq);
  for (int r = 0; r < s.rows; ++r) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < s.seq; ++i) {
        const T* p = &probs[ix.probs(r, h, i)];
        const T* go = &dout[ix.out(r, i, h)];
        const int n = ix.visible(i);
        // Through out = P V: to P, and to V.
        T p_dot_dp = 0;
        for (int j = 0; j < n; ++j) {
          dp[j] = Dot(go, &qkv[ix.v(r, j, h)], s.head_dim);
          p_dot_dp += p[j] * dp[j];
          Axpy(s.head_dim, p[j], go, &dqkv[ix.v(r, j, h)]);
        }
        // Through the softmax to the scores, then to q and k.
        const T* q = &qkv[ix.q(r, i, h)];
        T* dq = &dqkv[ix.q(r, i, h)];
        for (int j = 0; j < n; ++j) {
          const T ds = p[j] * (dp[j] - p_dot_dp) * scale;
          Axpy(s.head_dim, ds, &qkv[ix.k(r, j, h)], dq);
          Axpy(s.head_dim, ds, q, &dqkv[ix.k(r, j, h)]);
        }
      }
    }
  }
}

template <typename T>
T MseLoss(std::span<const T> y, std::span<const T> target, std::span<T> dy) {
  const T n = static_cast<T>(y.size());
  T sum = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const T e = y[i] - target[i];
    sum += e * e;
    dy[i] = T(2) * e / n;
  }
  return sum / n;
}

template <typename T>
void AddTo(std::span<T> dst, std::span<const T> src) {
  for (size_t i = 0; i < dst.size(); ++i) dst[i] += src[i];
}

#define ZERO_MODEL_KERNELS_(T)                                                                     \
  template void Linear<T>(const LinearShape&, std::span<const T>, std::span<const T>,              \
                          std::span<const T>, std::span<T>);                                       \
  template void LinearBackward<T>(const LinearShape&, std::span<const T>, std::span<const T>,      \
                                  std::span<const T>, std::span<T>, std::span<T>, std::span<T>);   \
  template void LayerNorm<T>(int, int, std::span<const T>, std::span<const T>, std::span<const T>, \
                             std::span<T>, std::span<T>, std::span<T>);                            \
  template void LayerNormBackward<T>(int, int, std::span<const T>, std::span<const T>,             \
                                     std::span<const T>, std::span<const T>, std::span<const T>,   \
                                     std::span<T>, std::span<T>, std::span<T>);                    \
  template void Activate<T>(Activation, std::span<const T>, std::span<T>);                         \
  template void ActivateBackward<T>(Activation, std::span<const T>, std::span<const T>,            \
                                    std::span<T>);                                                 \
  template void Attention<T>(const AttentionShape&, std::span<const T>, std::span<T>,              \
                             std::span<T>);                                                        \
  template void AttentionBackward<T>(const AttentionShape&, std::span<const T>,                    \
                                     std::span<const T>, std::span<const T>, std::span<T>);        \
  template T MseLoss<T>(std::span<const T>, std::span<const T>, std::span<T>);                     \
  template void AddTo<T>(std::span<T>, std::span<const T>);

ZERO_MODEL_KERNELS_(float)
ZERO_MODEL_KERNELS_(double)
#undef ZERO_MODEL_KERNELS_

}  // namespace zero::testing_model
