// What activations.cc (the fused accounting) and activations_hf.cc (the
// transformers accounting) share: a builder of one site's tensor list and
// the sizes of one micro-batch. Internal to those two files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "footprint/activations.h"
#include "footprint/transformer_shape.h"

namespace zero::footprint {

// Appends tensors in creation order. A size above the simulated device
// (experiment.h's kMetaCapacity) makes Done an error naming the first such
// tensor; sizes are computed in double, exact below 2^53.
class SiteBuilder {
 public:
  static constexpr double kMaxTensorBytes = double(uint64_t{1} << 50);

  int Saved(const std::string& name, double bytes, bool grad = true) {
    return Add({name, 0, true, false, grad}, bytes);
  }
  int Core(const std::string& name, double bytes, bool grad = true) {
    return Add({name, 0, true, true, grad}, bytes);
  }
  int Transient(const std::string& name, double bytes, bool core = false) {
    return Add({name, 0, false, core, true}, bytes);
  }
  // Saved when `saved`, else transient.
  int Maybe(bool saved, const std::string& name, double bytes, bool grad = true) {
    return saved ? Saved(name, bytes, grad) : Transient(name, bytes);
  }
  // Frees transient `id` right after the latest tensor is created (no-op
  // for -1 or a saved tensor: those stay).
  void Drop(int id) {
    if (id >= 0 && !site_.tensors[id].saved) site_.drops.back().push_back(id);
  }

  absl::StatusOr<SiteActivations> Done() && {
    if (!too_large_.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the activation '%s' would take %.4g bytes, more than the simulated device's 2^50 "
          "(lower --seq or --micro_batch)",
          too_large_, too_large_bytes_));
    }
    return std::move(site_);
  }

 private:
  int Add(ActTensor t, double bytes) {
    if (!(bytes <= kMaxTensorBytes) && too_large_.empty()) {
      too_large_ = t.name;
      too_large_bytes_ = bytes;
    }
    t.bytes = bytes <= kMaxTensorBytes ? static_cast<uint64_t>(bytes) : 1;
    site_.tensors.push_back(std::move(t));
    site_.drops.emplace_back();
    return static_cast<int>(site_.tensors.size()) - 1;
  }

  SiteActivations site_;
  std::string too_large_;
  double too_large_bytes_ = 0;
};

// Sizes of one micro-batch, in double. Holds references: lives within one
// ActivationsOf call.
struct Dims {
  Dims(const TransformerShape& s, const ActivationOptions& o)
      : s(s), o(o), tokens(double(o.seq) * double(o.micro_batch)), b(double(o.element_bytes)) {}
  double Act(double width) const { return tokens * width * b; }  // T x width, model dtype
  double Fp32(double width) const { return tokens * width * 4; }
  double Hidden() const { return Act(double(s.hidden)); }

  const TransformerShape& s;
  const ActivationOptions& o;
  const double tokens, b;
};

// What the loss keeps after the final norm, in both accountings: the logits
// (and their fp32 copy in a narrower model), transient; the fp32
// log-softmax; the targets.
inline void LossTail(SiteBuilder& site, const Dims& d) {
  const double v = double(d.s.vocab);
  int logits = site.Transient("logits", d.Act(v));
  if (d.o.element_bytes != 4) {
    const int wide = site.Transient("logits.fp32", d.Fp32(v));
    site.Drop(logits);
    logits = wide;
  }
  site.Saved("log_probs", d.Fp32(v));
  site.Drop(logits);
  site.Saved("targets", d.tokens * 8, false);
}

}  // namespace zero::footprint
