// What every C function of libzero_engine.so does at the boundary: the
// handles' definitions (opaque in zero_engine.h), a status turned into an int
// code (zero_status) plus this thread's error text, no exception let
// through, and the size check of the structs the caller fills.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "memory/device_system.h"
#include "memory/node_range.h"
#include "optimizers/grouped_optimizer.h"
#include "zero/capi/zero_engine.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/comm/communicator.h"
#include "zero/engine.h"

struct zero_devices {
  std::unique_ptr<zero::DeviceSystem> system;
  std::shared_ptr<zero::NodeRange> node;  // set by zero_devices_create_node
};
struct zero_comm {
  std::unique_ptr<zero::Communicator> comm;
};
struct zero_engine {
  std::unique_ptr<zero::GroupedOptimizer> optimizer;  // outlives the engine
  std::unique_ptr<zero::Engine> engine;
  // Not owned: the caller destroys engines before these (zero_engine.h).
  zero::Communicator* comm = nullptr;
  zero::DeviceSystem* devices = nullptr;
  // zero_engine_save_start's and zero_engine_snapshot_start's, made at the
  // first; last, so they go first (waiting for their writes) while the
  // engine they read still lives. At most one has a save pending.
  std::unique_ptr<zero::checkpoint::AsyncSaver> saver;
  std::unique_ptr<zero::checkpoint::AsyncSaver> snapshotter;
};

namespace zero::capi {

// The text zero_engine_last_error() returns on this thread.
std::string& LastError();

// 0 for OK; else the code, with the text kept in LastError().
int Return(const absl::Status& status);

absl::Status Required(const void* p, absl::string_view what);

// The pool of device `device` of `devices` (not null); InvalidArgument
// "device D of N" for an index it does not have.
absl::StatusOr<DevicePool*> PoolOf(zero_devices_t devices, int device);

// InvalidArgument unless `given`, the `size` member of a struct the caller
// filled (of type `what`), is this library's sizeof, `expected`: else the
// caller was built against another zero_engine.h, and reading on would
// misread its memory.
absl::Status CheckStructSize(absl::string_view what, size_t given, size_t expected);

// Runs `body` (returning absl::Status) with nothing escaping but the code.
template <class Body>
int Guard(Body body) {
  try {
    return Return(body());
  } catch (const std::exception& e) {
    return Return(absl::InternalError(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return Return(absl::InternalError("unexpected exception"));
  }
}

// Copies `text` into the caller's buffer NCCL-style: at most `size` bytes
// (NUL included) into `buffer` (may be null when size is 0), and the full
// length plus one into *needed.
absl::Status CopyOut(const std::string& text, char* buffer, size_t size, size_t* needed);

}  // namespace zero::capi
