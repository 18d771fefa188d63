#include "footprint/step_runner.h"

#include "base/status_macros.h"

namespace zero::footprint {

StepRunner::StepRunner(const StepScript& script, const ModelSpec& model, DType dtype,
                       Engine& engine, MemoryResource& pool)
    : script_(script),
      model_(model),
      dtype_(dtype),
      engine_(engine),
      pool_(pool),
      slots_(script.slot_bytes.size(), nullptr) {
  int id = 0;
  for (const ModuleSpec& m : model.modules) {
    first_param_.push_back(id);
    id += static_cast<int>(m.params.size());
  }
}

absl::Status StepRunner::HandOver(int module) {
  int id = first_param_[module];
  for (const ParamShape& p : model_.modules[module].params) {
    RETURN_IF_ERROR(engine_.AddGrad(id++, nullptr, p.numel(), dtype_));
  }
  return absl::OkStatus();
}

absl::Status StepRunner::Step(const std::function<void(int mark)>& on_mark) {
  for (const StepOp& op : script_.ops) {
    switch (op.kind) {
      case StepOp::Kind::kFetch: RETURN_IF_ERROR(engine_.Fetch(op.arg)); break;
      case StepOp::Kind::kRelease: RETURN_IF_ERROR(engine_.Release(op.arg)); break;
      case StepOp::Kind::kGrads: RETURN_IF_ERROR(HandOver(op.arg)); break;
      case StepOp::Kind::kAlloc: {
        ASSIGN_OR_RETURN(slots_[op.arg],
                         pool_.Allocate(script_.slot_bytes[op.arg], Tag::kActivations));
        break;
      }
      case StepOp::Kind::kFree:
        RETURN_IF_ERROR(pool_.Deallocate(slots_[op.arg], script_.slot_bytes[op.arg]));
        slots_[op.arg] = nullptr;
        break;
      case StepOp::Kind::kMark:
        if (on_mark) on_mark(op.arg);
        break;
    }
  }
  return engine_.Step();
}

}  // namespace zero::footprint
