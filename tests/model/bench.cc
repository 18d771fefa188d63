// Time of one ForwardBackward (dense reader, no-op hooks) for the sizes the
// engine tests use, and the loss curve of plain SGD as a sanity check.
#include <chrono>
#include <cstdio>
#include <memory>

#include "tests/model/model.h"

namespace zero::testing_model {
namespace {

int Bench(const char* name, const Model& model) {
  auto params = InitialParams(model, 1);
  if (!params.ok()) return 1;
  const Batch batch = model.MakeBatch(2);
  ParamSet grads;
  constexpr int kWarmup = 20, kIters = 2000;
  for (int i = 0; i < kWarmup; ++i) (void)ForwardBackwardDense(model, *params, batch, &grads);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) (void)ForwardBackwardDense(model, *params, batch, &grads);
  const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
  std::printf("%-40s %8zu params  %8.1f us / ForwardBackward\n", name, TotalNumel(model),
              took.count() / kIters);
  return 0;
}

int Main() {
  auto mlp = MakeMlp(16, 32, 8, 8);
  auto tf = MakeTransformer(2, 16, 2, 8, 2);
  auto tf4 = MakeTransformer(4, 32, 4, 16, 4);
  if (!mlp.ok() || !tf.ok() || !tf4.ok()) return 1;
  return Bench("MLP(16, 32, 8, rows=8)", **mlp) |
         Bench("Transformer(2, 16, heads=2, seq=8, rows=2)", **tf) |
         Bench("Transformer(4, 32, heads=4, seq=16, rows=4)", **tf4);
}

}  // namespace
}  // namespace zero::testing_model

int main() { return zero::testing_model::Main(); }
