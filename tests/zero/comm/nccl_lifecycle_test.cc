// The NCCL backend's waits on a non-blocking communicator (ncclInProgress),
// its teardown and its failure paths, over the fake NCCL table and fake card
// of nccl_fakes.h: runs everywhere.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zero/comm/nccl_fakes.h"
#include "zero/comm/nccl_api.h"
#include "zero/comm/nccl_communicator.h"

namespace zero::nccl {
namespace {

using ::testing::HasSubstr;

const char* NoLastError(ncclComm_t) { return ""; }
const char* SocketLastError(ncclComm_t) { return " socket to peer 10.0.0.2 closed\n"; }

TEST(NcclStatusTest, AppendsNcclsLastErrorWhenItHasText) {
  NcclApi api = FakeApi();
  EXPECT_TRUE(NcclStatus(api, ncclSuccess, "ncclAllReduce").ok());
  const absl::Status plain = NcclStatus(api, ncclSystemError, "ncclAllReduce");
  EXPECT_EQ(std::string(plain.message()), "ncclAllReduce: fake NCCL error (2)");
  api.GetLastError = NoLastError;
  EXPECT_EQ(NcclStatus(api, ncclSystemError, "ncclAllReduce"), plain);
  api.GetLastError = SocketLastError;
  const absl::Status detailed = NcclStatus(api, ncclRemoteError, "ncclAllReduce");
  EXPECT_TRUE(absl::IsInternal(detailed)) << detailed;
  EXPECT_EQ(std::string(detailed.message()),
            "ncclAllReduce: fake NCCL error (6); NCCL's last error: socket to peer 10.0.0.2 "
            "closed");
}

}  // namespace
}  // namespace zero::nccl
