// Two dense layers with a ReLU between them, against a fixed random teacher.
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tests/model/kernels.h"
#include "tests/model/model.h"
#include "tests/model/network.h"

namespace zero::testing_model {
namespace {

using internal::Pass;

// Fixed, so every batch comes from the same function and SGD can fit it.
constexpr uint64_t kTeacherSeed = 0x7eac4e12;
constexpr uint64_t kInputSalt = 1;

class MlpModel final : public internal::NetworkModelOf<MlpModel> {
 public:
  MlpModel(int in, int hidden, int out, int rows)
      : in_(in), hidden_(hidden), out_(out), rows_(rows) {
    AddModule("fc1");
    fc1_ = AddDense("fc1", in, hidden);
    AddModule("fc2");
    fc2_ = AddDense("fc2", hidden, out);
    // Gain 2 so the targets are not all near zero after the tanh.
    teacher_ = internal::UniformValues(kTeacherSeed, static_cast<size_t>(out) * in,
                                       2.0 / std::sqrt(static_cast<double>(in)));
  }

  // Inputs uniform in [-1, 1); targets tanh(A x) for the teacher A.
  Batch MakeBatch(uint64_t seed) const override {
    Batch batch;
    batch.rows = rows_;
    batch.inputs =
        internal::UniformValues(MixSeed(seed, kInputSalt), static_cast<size_t>(rows_) * in_, 1.0);
    batch.targets.resize(static_cast<size_t>(rows_) * out_);
    const std::vector<float> no_bias(out_, 0.0f);
    Linear<float>({rows_, in_, out_}, batch.inputs, teacher_, no_bias, batch.targets);
    for (float& t : batch.targets) t = std::tanh(t);
    return batch;
  }

  template <typename T>
  absl::StatusOr<T> Run(Pass<T>& pass, const Batch& batch) const {
    RETURN_IF_ERROR(CheckBatch(batch, in_, out_));
    const int rows = batch.rows;
    const std::vector<T> x(batch.inputs.begin(), batch.inputs.end());
    const std::vector<T> target(batch.targets.begin(), batch.targets.end());
    const size_t hidden_size = static_cast<size_t>(rows) * hidden_;
    std::vector<T> pre(hidden_size), h(hidden_size), dh(hidden_size);
    std::vector<T> y(target.size()), dy(target.size());

    auto forward = [&](int module) -> absl::Status {
      if (module == 1) return fc2_.Forward<T>(pass, rows, h, y);
      RETURN_IF_ERROR(fc1_.Forward<T>(pass, rows, x, pre));
      Activate<T>(Activation::kRelu, pre, h);
      return absl::OkStatus();
    };
    auto loss = [&]() -> absl::StatusOr<T> { return MseLoss<T>(y, target, dy); };
    auto backward = [&](int module) -> absl::Status {
      if (module == 1) return fc2_.Backward<T>(pass, rows, h, dy, dh);
      ActivateBackward<T>(Activation::kRelu, pre, dh, dh);  // elementwise, so in place
      return fc1_.Backward<T>(pass, rows, x, dh, {});
    };
    return pass.Run(forward, loss, backward);
  }

 private:
  int in_, hidden_, out_, rows_;
  internal::DenseLayer fc1_, fc2_;
  std::vector<float> teacher_;  // [out, in]
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeMlp(int in, int hidden, int out, int rows) {
  if (in <= 0 || hidden <= 0 || out <= 0 || rows <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MakeMlp: sizes must be positive: ", in, ", ", hidden, ", ", out, ", ", rows));
  }
  return std::make_unique<MlpModel>(in, hidden, out, rows);
}

}  // namespace zero::testing_model
