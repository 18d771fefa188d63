#include "zero/checkpoint/internal/agreement.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "zero/buffer.h"

namespace zero::checkpoint {

absl::Status Agreement::AbortIfError(absl::Status status) {
  if (!status.ok()) comm_.Abort(status);
  return status;
}

absl::Status Agreement::SettleIfError(absl::Status status) {
  // Copies queued before the failure still read the caller's record and
  // write `host`: both are gone once the error returns.
  if (!status.ok()) (void)stream_->Synchronize();
  return status;
}

absl::StatusOr<std::string> Agreement::AllGather(std::string_view record) {
  const size_t n = world_size();
  const size_t stride = AlignUp(record.size(), sizeof(float));
  if (n == 1) return std::string(record);
  absl::StatusOr<Buffer> all = Buffer::Allocate(&pool_, n * stride, Tag::kCommunication, stream_);
  RETURN_IF_ERROR(AbortIfError(all.status()));
  char* slot = all->data<char>() + rank() * stride;
  RETURN_IF_ERROR(AbortIfError(stream_->Fill(slot, 0, stride)));
  std::string host(n * stride, '\0');
  RETURN_IF_ERROR(SettleIfError(AbortIfError(stream_->Copy(slot, record.data(), record.size()))));
  RETURN_IF_ERROR(SettleIfError(
      comm_.AllGather(slot, all->data(), stride / sizeof(float), DType::kF32, stream_)));
  RETURN_IF_ERROR(SettleIfError(AbortIfError(stream_->Copy(host.data(), all->data(), host.size()))));
  RETURN_IF_ERROR(AbortIfError(stream_->Synchronize()));
  std::string out;
  out.reserve(n * record.size());
  for (size_t r = 0; r < n; ++r) out.append(host, r * stride, record.size());
  return out;
}

absl::StatusOr<std::string> Agreement::FromRoot(std::string_view value) {
  if (value.size() > kMaxRootBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a value of ", value.size(), " bytes is too long to broadcast"));
  }
  if (world_size() == 1) return std::string(value);
  constexpr size_t kBytes = sizeof(uint32_t) + kMaxRootBytes;
  std::string host(kBytes, '\0');
  const uint32_t length = static_cast<uint32_t>(value.size());
  std::memcpy(host.data(), &length, sizeof length);
  std::memcpy(host.data() + sizeof length, value.data(), value.size());
  absl::StatusOr<Buffer> buffer = Buffer::Allocate(&pool_, kBytes, Tag::kCommunication, stream_);
  RETURN_IF_ERROR(AbortIfError(buffer.status()));
  RETURN_IF_ERROR(SettleIfError(AbortIfError(stream_->Copy(buffer->data(), host.data(), kBytes))));
  RETURN_IF_ERROR(SettleIfError(comm_.Broadcast(buffer->data(), buffer->data(),
                                                kBytes / sizeof(float), DType::kF32, /*root=*/0,
                                                stream_)));
  RETURN_IF_ERROR(SettleIfError(AbortIfError(stream_->Copy(host.data(), buffer->data(), kBytes))));
  RETURN_IF_ERROR(AbortIfError(stream_->Synchronize()));
  uint32_t got;
  std::memcpy(&got, host.data(), sizeof got);
  if (got > kMaxRootBytes) return absl::InternalError("a broadcast value arrived garbled");
  return host.substr(sizeof got, got);
}

std::string Agreement::EncodeStatus(const absl::Status& status) {
  std::string record(kStatusBytes, '\0');
  const int32_t code = static_cast<int32_t>(status.code());
  const std::string message =
      std::string(status.message()).substr(0, kStatusBytes - 2 * sizeof(uint32_t));
  const uint32_t length = static_cast<uint32_t>(message.size());
  std::memcpy(record.data(), &code, sizeof code);
  std::memcpy(record.data() + 4, &length, sizeof length);
  std::memcpy(record.data() + 8, message.data(), message.size());
  return record;
}

absl::Status Agreement::DecodeStatus(std::string_view record, int rank) {
  int32_t code;
  uint32_t length;
  std::memcpy(&code, record.data(), sizeof code);
  std::memcpy(&length, record.data() + 4, sizeof length);
  if (code == 0) return absl::OkStatus();
  if (length > kStatusBytes - 8) length = kStatusBytes - 8;
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrCat("rank ", rank, ": ", std::string(record.substr(8, length))));
}

absl::Status Agreement::FirstError(std::string_view records, size_t stride, int world) {
  for (int r = 0; r < world; ++r) {
    absl::Status s = DecodeStatus(records.substr(r * stride, kStatusBytes), r);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Agreement::AllOk(const absl::Status& mine) {
  ASSIGN_OR_RETURN(std::string all, AllGather(EncodeStatus(mine)));
  return FirstError(all, kStatusBytes, world_size());
}

}  // namespace zero::checkpoint
