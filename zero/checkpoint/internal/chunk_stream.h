// Load's reads (load_plan.h): plan.in_flight at a time through DirectFile
// (O_DIRECT where the filesystem allows), in order, each into one of
// plan.slots pinned host buffers (pinned_buffers.h), every chunk checked
// against its CRC-32C on the reading thread, and handed to the caller in
// plan order, except that a Run starts with the reads the last one left in
// the buffers. Host staging is plan.staging_bytes() whatever the
// checkpoint's size, allocated by the first Run and kept for the next, which
// takes those reads from there, verified, instead of reading the files
// again: Load's second pass reads only what did not fit (nothing when the
// plan has no more reads than buffers). Used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "base/direct_file.h"
#include "memory/device_system.h"
#include "zero/checkpoint/internal/data_files.h"
#include "zero/checkpoint/internal/load_plan.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/checkpoint/internal/pinned_buffers.h"

namespace zero::checkpoint {

class ChunkStream {
 public:
  // Opens the data files the plan reads and checks each (size, header:
  // verified_reader.h); reads open them again, a few at a time
  // (data_files.h). `manifest` and `plan` must outlive the stream.
  static absl::StatusOr<ChunkStream> Open(const std::string& folder, const Manifest& manifest,
                                          const LoadPlan& plan, DeviceSystem& devices);

  // `span` holds file bytes [read.begin, read.end) of read.file, every chunk
  // in it verified; valid during the call.
  using Consumer = absl::FunctionRef<absl::Status(const ChunkRead& read, const std::byte* span)>;
  // Every read of the plan, in the order above; stops at the first error (a read, a
  // checksum, or the consumer's), which it returns.
  absl::Status Run(Consumer consume);

  uint64_t peak_staging_bytes() const { return peak_staging_bytes_; }
  uint64_t bytes_read() const { return bytes_read_; }  // from the files, every Run
  bool direct() const { return all_direct_; }  // O_DIRECT in effect on every file read

 private:
  ChunkStream(const std::string& folder, const Manifest& manifest, const LoadPlan& plan,
              DeviceSystem& devices)
      : plan_(&plan),
        files_(std::make_unique<DataFiles>(folder, manifest)),
        devices_(&devices) {}
  // `direct`: whether the read went around the page cache.
  absl::Status ReadAndVerify(const ChunkRead& read, std::byte* buffer, bool& direct);
  std::vector<size_t> Order() const;  // of this Run's reads: those still resident first

  const LoadPlan* plan_;
  std::unique_ptr<DataFiles> files_;  // a pointer: the stream moves
  DeviceSystem* devices_;                           // where the staging is pinned for
  std::unique_ptr<PinnedBuffers> buffers_;           // plan_->slots staging buffers, kept
  // Per slot, the read whose verified bytes it holds (kNone: none): written
  // under Run's lock by the reader that filled the slot, read by the one
  // that fills it next (after the caller released it) or in the next Run.
  static constexpr size_t kNone = ~size_t{0};
  std::vector<size_t> resident_;
  uint64_t peak_staging_bytes_ = 0;
  uint64_t bytes_read_ = 0;
  bool all_direct_ = true;  // written under Run's lock
};

}  // namespace zero::checkpoint
