// The pager on host devices: moves keep bytes, the budget holds, eviction is
// LRU before a recorded step and furthest-next-use after, prefetch follows the
// record, and every bad input is a clear error that changes nothing.
#include "offload/pager.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

constexpr size_t kUnit = kMiB;
constexpr size_t kLargestBudget = 3 * kUnit;  // SetBudget lowers it at times

class PagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto system = DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
    auto host = PinnedHostPool::Create(system_.get(), 64 * kMiB, {.arena_bytes = 16 * kMiB});
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    auto pager = Pager::Create(system_.get(), 0, host_.get(), {.budget_bytes = kLargestBudget});
    ASSERT_TRUE(pager.ok()) << pager.status();
    pager_ = std::move(*pager);
  }
  void TearDown() override { ExpectWithinBudget(); }

  // The invariant every test re-checks: the pager's books and the device
  // pool (which only the pager uses here) both stay within the budget.
  void ExpectWithinBudget() {
    if (pager_ == nullptr) return;
    const PagerStats s = pager_->stats();
    EXPECT_LE(s.device_bytes, s.budget);
    EXPECT_LE(s.peak_device_bytes, kLargestBudget);
    EXPECT_LE(system_->pool(0).stats().requested, s.budget);
  }

  TensorHandle Register(const std::string& name, size_t bytes = kUnit) {
    auto h = pager_->Register(bytes, Tag::kParameters, name);
    EXPECT_TRUE(h.ok()) << h.status();
    names_[h.ok() ? h->id : 0] = name;
    return h.ok() ? *h : TensorHandle{};
  }
  // Acquire on the host thread and release at once: one "use".
  void Use(TensorHandle h, Access access = Access::kReadWrite) {
    auto pin = pager_->Acquire(h, nullptr, access);
    ASSERT_TRUE(pin.ok()) << pin.status();
    ExpectWithinBudget();
  }
  Residency Where(TensorHandle h) { return pager_->residency(h).value(); }
  // The names of the tensors resident on the device, in handle order.
  std::vector<std::string> OnDevice(const std::vector<TensorHandle>& all) {
    std::vector<std::string> out;
    for (TensorHandle h : all) {
      if (Where(h) == Residency::kDevice) out.push_back(names_[h.id]);
    }
    return out;
  }
  void Write(TensorHandle h, unsigned char value) {
    auto pin = pager_->Acquire(h, nullptr);
    ASSERT_TRUE(pin.ok()) << pin.status();
    std::memset(pin->data(), value, pin->bytes());
  }
  bool Holds(TensorHandle h, unsigned char value) {
    auto pin = pager_->Acquire(h, nullptr, Access::kRead);
    EXPECT_TRUE(pin.ok()) << pin.status();
    if (!pin.ok()) return false;
    const auto* p = static_cast<const unsigned char*>(pin->data());
    for (size_t i = 0; i < pin->bytes(); ++i) {
      if (p[i] != value) return false;
    }
    return true;
  }

  std::unique_ptr<DeviceSystem> system_;
  std::unique_ptr<PinnedHostPool> host_;
  std::unique_ptr<Pager> pager_;
  std::map<uint64_t, std::string> names_;
};

TEST_F(PagerTest, RegisteredTensorsStartOnHostAndAcquirePagesIn) {
  TensorHandle a = Register("a");
  EXPECT_EQ(Where(a), Residency::kHost);
  EXPECT_EQ(pager_->stats().host_bytes, kUnit);
  EXPECT_EQ(host_->stats().tag(Tag::kParameters).current, kUnit) << "home block on host";
  {
    auto pin = pager_->Acquire(a, nullptr);
    ASSERT_TRUE(pin.ok()) << pin.status();
    EXPECT_EQ(system_->device_of(pin->data()), 0);
    EXPECT_EQ(pin->bytes(), kUnit);
    const PagerStats s = pager_->stats();
    EXPECT_EQ(s.device_bytes, kUnit);
    EXPECT_EQ(s.held_bytes, kUnit);
    EXPECT_EQ(s.host_bytes, 0u);
    EXPECT_EQ(s.page_ins, 1u);
    EXPECT_EQ(s.bytes_paged_in, 0u) << "nothing to copy before the first write";
    EXPECT_EQ(system_->pool(0).stats().tag(Tag::kParameters).current, kUnit);
  }
  EXPECT_EQ(pager_->stats().held_bytes, 0u);
  EXPECT_EQ(Where(a), Residency::kDevice) << "released, still cached on the device";
}

TEST_F(PagerTest, BytesSurviveRoundTrips) {
  TensorHandle a = Register("a");
  Write(a, 0x5A);
  ASSERT_TRUE(pager_->PageOut(a).ok());
  EXPECT_EQ(Where(a), Residency::kHost);
  EXPECT_EQ(system_->pool(0).stats().requested, 0u) << "device block freed";
  ASSERT_TRUE(pager_->PageIn(a).ok());
  EXPECT_EQ(Where(a), Residency::kDevice);
  EXPECT_TRUE(Holds(a, 0x5A));
  const PagerStats s = pager_->stats();
  EXPECT_EQ(s.page_outs, 1u);
  EXPECT_EQ(s.page_ins, 2u);
  EXPECT_EQ(s.bytes_paged_out, kUnit);
  EXPECT_EQ(s.bytes_paged_in, kUnit);
}

TEST_F(PagerTest, ACleanTensorIsDroppedWithoutACopy) {
  TensorHandle a = Register("a");
  Write(a, 1);
  ASSERT_TRUE(pager_->PageOut(a).ok());
  EXPECT_TRUE(Holds(a, 1));  // read-only use: stays clean
  ASSERT_TRUE(pager_->PageOut(a).ok());
  EXPECT_EQ(pager_->stats().bytes_paged_out, kUnit) << "only the first page-out copied";
  EXPECT_EQ(pager_->stats().page_outs, 2u);
  EXPECT_TRUE(Holds(a, 1));
}

TEST_F(PagerTest, WorkOnAStreamIsOrderedAgainstTheCopies) {
  Stream* compute = *system_->CreateStream(0);
  TensorHandle a = Register("a");
  {
    auto pin = pager_->Acquire(a, compute);
    ASSERT_TRUE(pin.ok());
    void* data = pin->data();
    ASSERT_TRUE(compute->Enqueue([data] { std::memset(data, 0x33, kUnit); }).ok());
  }
  // The page-out copy must wait for the fill still queued on `compute`.
  ASSERT_TRUE(pager_->PageOut(a).ok());
  EXPECT_TRUE(Holds(a, 0x33));
}

TEST_F(PagerTest, EvictsTheLeastRecentlyUsedBeforeAnyRecord) {
  std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C"), Register("D")};
  Use(t[0]);
  Use(t[1]);
  Use(t[2]);
  Use(t[0]);  // A is now the most recent; B the least
  Use(t[3]);
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"A", "C", "D"}));
  EXPECT_EQ(pager_->stats().evictions, 1u);
}

TEST_F(PagerTest, EvictsTheFurthestNextUseAfterARecordedStep) {
  std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C"), Register("D")};
  ASSERT_TRUE(pager_->BeginStep().ok());
  for (int i : {0, 1, 2, 3, 0, 1}) Use(t[i]);  // A B C D A B
  ASSERT_TRUE(pager_->EndStep().ok());
  for (TensorHandle h : t) ASSERT_TRUE(pager_->PageOut(h).ok());

  const uint64_t evictions = pager_->stats().evictions;
  ASSERT_TRUE(pager_->BeginStep().ok());
  Use(t[0]);
  Use(t[1]);
  Use(t[2]);
  // At D (position 3) the record says: A next at 4, B at 5, C never. LRU
  // would evict A; Belady evicts C.
  Use(t[3]);
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"A", "B", "D"}));
  Use(t[0]);
  Use(t[1]);
  EXPECT_EQ(pager_->stats().evictions, evictions + 1) << "A and B were still there";
  ASSERT_TRUE(pager_->EndStep().ok());
}

TEST_F(PagerTest, PrefetchBringsTheNextTensorsOfTheRecord) {
  std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C"), Register("D")};
  EXPECT_EQ(*pager_->Prefetch(2), 0) << "no record yet";
  ASSERT_TRUE(pager_->BeginStep().ok());
  for (TensorHandle h : t) Use(h);
  ASSERT_TRUE(pager_->EndStep().ok());
  for (TensorHandle h : t) ASSERT_TRUE(pager_->PageOut(h).ok());

  const uint64_t evictions = pager_->stats().evictions;
  ASSERT_TRUE(pager_->BeginStep().ok());
  Use(t[0]);
  EXPECT_EQ(*pager_->Prefetch(2), 2);
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(pager_->stats().prefetches, 2u);
  EXPECT_EQ(pager_->stats().evictions, evictions) << "B and C fit beside A";
  // D is next after B and C; A is not used again this step, so it makes room.
  EXPECT_EQ(*pager_->Prefetch(3), 1);
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"B", "C", "D"}));
  const uint64_t page_ins = pager_->stats().page_ins;
  Use(t[1]);
  Use(t[2]);
  Use(t[3]);
  EXPECT_EQ(pager_->stats().page_ins, page_ins) << "every acquire found its tensor resident";
  ASSERT_TRUE(pager_->EndStep().ok());
}

TEST_F(PagerTest, PrefetchNeverEvictsATensorNeededSooner) {
  std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C"), Register("D")};
  ASSERT_TRUE(pager_->BeginStep().ok());
  for (int i : {0, 1, 2, 0, 1, 2, 3}) Use(t[i]);
  ASSERT_TRUE(pager_->EndStep().ok());
  // The step ended with B, C, D resident (LRU evicted A for D).
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"B", "C", "D"}));
  ASSERT_TRUE(pager_->BeginStep().ok());
  // A comes first and D last: D makes room for A. Then A, B, C are resident
  // and all needed before D, so D may not come back.
  EXPECT_EQ(*pager_->Prefetch(4), 1);
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(*pager_->Prefetch(4), 0);
  ASSERT_TRUE(pager_->EndStep().ok());
}

TEST_F(PagerTest, HeldTensorsAreNeverEvicted) {
  std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C"), Register("D")};
  auto a = pager_->Acquire(t[0], nullptr);
  auto b = pager_->Acquire(t[1], nullptr);
  auto c = pager_->Acquire(t[2], nullptr);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const PagerStats before = pager_->stats();
  auto d = pager_->Acquire(t[3], nullptr);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("3.00 MiB held"));
  EXPECT_EQ(pager_->PageIn(t[3]).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(pager_->stats().evictions, before.evictions);
  EXPECT_EQ(pager_->stats().page_ins, before.page_ins);
  ASSERT_TRUE(b->Release().ok());
  EXPECT_TRUE(pager_->Acquire(t[3], nullptr).ok()) << "B made room once released";
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"A", "C", "D"}));
}

TEST_F(PagerTest, SetBudgetEvictsDownToIt) {
  std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C")};
  for (TensorHandle h : t) Use(h);
  ASSERT_TRUE(pager_->SetBudget(kUnit).ok());
  EXPECT_EQ(OnDevice(t), (std::vector<std::string>{"C"})) << "LRU kept the most recent";
  EXPECT_EQ(pager_->stats().budget, kUnit);
  ExpectWithinBudget();
  ASSERT_TRUE(pager_->SetBudget(3 * kUnit).ok());
}

TEST_F(PagerTest, BadInputsAreClearErrorsThatChangeNothing) {
  TensorHandle a = Register("a");
  Write(a, 9);
  const PagerStats before = pager_->stats();

  auto zero = pager_->Register(0, Tag::kOther, "empty");
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("zero bytes"));
  auto huge = pager_->Register(3 * kUnit + 1, Tag::kOther, "huge");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("larger than the whole device budget"));

  for (TensorHandle bad : {TensorHandle{}, TensorHandle{a.id + 100}}) {
    EXPECT_EQ(pager_->Acquire(bad, nullptr).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(pager_->PageIn(bad).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(pager_->PageOut(bad).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(pager_->Unregister(bad).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(pager_->residency(bad).status().code(), absl::StatusCode::kNotFound);
  }
  {
    auto pin = pager_->Acquire(a, nullptr, Access::kRead);
    ASSERT_TRUE(pin.ok());
    absl::Status out = pager_->PageOut(a);
    EXPECT_EQ(out.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(out.message()), HasSubstr("held"));
    EXPECT_EQ(pager_->Unregister(a).code(), absl::StatusCode::kFailedPrecondition);
    absl::Status budget = pager_->SetBudget(kUnit / 2);
    EXPECT_EQ(budget.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(budget.message()), HasSubstr("held"));
    EXPECT_EQ(pager_->SetBudget(0).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Where(a), Residency::kDevice);
  }
  EXPECT_EQ(pager_->EndStep().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(pager_->BeginStep().ok());
  EXPECT_EQ(pager_->BeginStep().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(pager_->EndStep().ok());

  const PagerStats after = pager_->stats();
  EXPECT_EQ(after.budget, before.budget);
  EXPECT_EQ(after.tensors, 1u);
  EXPECT_EQ(after.device_bytes, before.device_bytes);
  EXPECT_EQ(after.page_outs, before.page_outs);
  EXPECT_TRUE(Holds(a, 9));

  ASSERT_TRUE(pager_->Unregister(a).ok());
  EXPECT_EQ(pager_->Acquire(a, nullptr).status().code(), absl::StatusCode::kNotFound)
      << "a stale handle";
  EXPECT_EQ(Register("b").id, a.id + 1) << "ids are never reused";
  EXPECT_EQ(host_->stats().tag(Tag::kParameters).live, 1u) << "a's home block went back";
}

TEST_F(PagerTest, CreateRejectsBadArguments) {
  EXPECT_EQ(Pager::Create(system_.get(), 0, host_.get(), {.budget_bytes = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Pager::Create(system_.get(), 1, host_.get(), {.budget_bytes = kMiB}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Pager::Create(system_.get(), 0, nullptr, {.budget_bytes = kMiB}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PagerTest, AcquireOnAnotherDevicesStreamIsRejected) {
  auto two = DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, 16 * kMiB});
  ASSERT_TRUE(two.ok());
  TensorHandle a = Register("a");
  auto pin = pager_->Acquire(a, (*two)->default_stream(1));
  EXPECT_EQ(pin.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Where(a), Residency::kHost);
}

// Meta devices: the same moves and budget, bookkeeping only.
TEST(PagerMetaTest, MovesAreBookkeepingOnly) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 80 * kGiB});
  ASSERT_TRUE(system.ok());
  auto host = PinnedHostPool::Create(system->get(), size_t{1} << 40);
  ASSERT_TRUE(host.ok());
  auto pager = Pager::Create(system->get(), 0, host->get(), {.budget_bytes = 60 * kGiB});
  ASSERT_TRUE(pager.ok()) << pager.status();
  std::vector<TensorHandle> t;
  for (int i = 0; i < 8; ++i) t.push_back(*(*pager)->Register(20 * kGiB, Tag::kParameters, "w"));
  for (int round = 0; round < 3; ++round) {
    for (TensorHandle h : t) {
      auto pin = (*pager)->Acquire(h, (*system)->default_stream(0));
      ASSERT_TRUE(pin.ok()) << pin.status();
      EXPECT_LE((*pager)->stats().device_bytes, 60 * kGiB);
    }
  }
  const PagerStats s = (*pager)->stats();
  EXPECT_EQ(s.page_ins, 24u);
  EXPECT_EQ(s.evictions, 21u);
  EXPECT_EQ(s.bytes_paged_out, 0u) << "no bytes to copy on meta devices";
  EXPECT_EQ((*system)->pool(0).stats().peak_requested, 60 * kGiB);
}

}  // namespace
}  // namespace zero
