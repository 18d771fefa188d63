// The checkpoint functions of zero_engine.h over zero/checkpoint: the handle
// already holds what a checkpoint participant needs (engine, optimizer,
// communicator, devices).
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "zero/capi/guard.h"
#include "zero/capi/zero_engine.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/consolidate.h"

namespace zero::capi {
namespace {

checkpoint::Participant Of(zero_engine& handle) {
  return {*handle.engine, *handle.optimizer, *handle.comm, *handle.devices};
}

}  // namespace
}  // namespace zero::capi

using zero::capi::Guard;
using zero::capi::Required;

namespace {

// The engine's save in flight (of either saver), or null.
zero::checkpoint::AsyncSaver* Pending(zero_engine& engine) {
  for (auto* saver : {engine.saver.get(), engine.snapshotter.get()}) {
    if (saver != nullptr && saver->pending()) return saver;
  }
  return nullptr;
}

// Publishes the save in flight first: published after a newer one, it
// would repoint `latest` back.
absl::Status WaitPending(zero_engine& engine) {
  zero::checkpoint::AsyncSaver* pending = Pending(engine);
  return pending == nullptr ? absl::OkStatus() : pending->Wait().status();
}

absl::Status StartSave(zero_engine* engine, const char* root, bool snapshot) {
  RETURN_IF_ERROR(Required(engine, "engine"));
  RETURN_IF_ERROR(Required(root, "root"));
  RETURN_IF_ERROR(WaitPending(*engine));
  std::unique_ptr<zero::checkpoint::AsyncSaver>& saver =
      snapshot ? engine->snapshotter : engine->saver;
  if (saver == nullptr) {
    saver = std::make_unique<zero::checkpoint::AsyncSaver>(
        zero::capi::Of(*engine), zero::checkpoint::SaveOptions{.publish_when_written = snapshot});
  }
  return saver->Start(root);
}

}  // namespace

extern "C" {

int zero_engine_save(zero_engine_t engine, const char* root, char* path, size_t size,
                     size_t* needed) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    RETURN_IF_ERROR(Required(root, "root"));
    RETURN_IF_ERROR(WaitPending(*engine));
    ASSIGN_OR_RETURN(std::string written,
                     zero::checkpoint::Save(zero::capi::Of(*engine), root));
    return zero::capi::CopyOut(written, path, size, needed);
  });
}

int zero_engine_save_start(zero_engine_t engine, const char* root) {
  return Guard([&] { return StartSave(engine, root, /*snapshot=*/false); });
}

int zero_engine_snapshot_start(zero_engine_t engine, const char* root) {
  return Guard([&] { return StartSave(engine, root, /*snapshot=*/true); });
}

int zero_engine_save_wait(zero_engine_t engine, char* path, size_t size, size_t* needed) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    zero::checkpoint::AsyncSaver* pending = Pending(*engine);
    if (pending == nullptr) {
      return absl::FailedPreconditionError("no checkpoint save is pending: start one first");
    }
    ASSIGN_OR_RETURN(std::string written, pending->Wait());
    return zero::capi::CopyOut(written, path, size, needed);
  });
}

int zero_engine_load(zero_engine_t engine, const char* path) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    RETURN_IF_ERROR(Required(path, "path"));
    return zero::checkpoint::Load(zero::capi::Of(*engine), path);
  });
}

int zero_checkpoint_consolidate(const char* checkpoint, const char* output) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(checkpoint, "checkpoint"));
    RETURN_IF_ERROR(Required(output, "output"));
    return zero::checkpoint::ConsolidateToSafetensors(checkpoint, output).status();
  });
}

}  // extern "C"
