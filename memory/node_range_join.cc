// How a node's processes agree on one range (NodeRange::Join): local rank 0
// leads. Every other process connects to the leader's abstract socket and
// says who it is; the leader proposes an address, each process tries to
// reserve the whole range there without replacing anything
// (MAP_FIXED_NOREPLACE) and answers; the leader gives the verdict. A process
// that failed proposes where it could reserve, for the next round. Once
// agreed, each sends the leader its memfd and gets every process's back.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/fingerprint.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "memory/internal/unix_socket.h"
#include "memory/node_range.h"

namespace zero {
namespace {

using internal::Fd;

constexpr uint64_t kMagic = 0x65646f6e6f72657aULL;  // "zeronode"
constexpr int kRounds = 8;

struct Hello {
  uint64_t magic;
  int32_t local_rank, local_world, pid, unused;
  uint64_t slice, chunk;
};
struct Reply {
  int32_t error;  // 0: reserved
  int32_t unused;
  uint64_t free_spot;  // where this process could reserve instead (0: nowhere)
};
struct Verdict {
  int32_t agreed, retry, failed_rank, error, failed_pid, unused;
  uint64_t base;
};
struct Table {
  int32_t pids[NodeRange::kMaxLocalWorld];
};

// 0, or errno: the address taken (EEXIST) or no room (ENOMEM).
int TryReserve(uintptr_t base, size_t bytes) {
  if (base == 0) return EINVAL;
  void* p = mmap(reinterpret_cast<void*>(base), bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED) return errno;
  if (reinterpret_cast<uintptr_t>(p) != base) {  // a kernel older than 4.17 took it as a hint
    munmap(p, bytes);
    return EEXIST;
  }
  return 0;
}

// Where this process's kernel would put the range (then given back).
uintptr_t FreeSpot(size_t bytes, size_t align) {
  void* p = mmap(nullptr, bytes + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return 0;
  munmap(p, bytes + align);
  return AlignUp(reinterpret_cast<uintptr_t>(p), align);
}

// First proposals: 32 to 96 TiB, the middle of x86-64's 128 TiB of user
// space, where processes of one program rarely map anything (their heaps
// grow from the bottom, libraries and mmap from the top, ASan's shadow ends
// below 16 TiB), so one address suits them all even when their layouts
// differ; spread by the key so that several ranges of a process do not
// collide. None under ThreadSanitizer, whose shadow memory is there.
std::vector<uintptr_t> Candidates(size_t bytes, const std::string& key) {
#if defined(__SANITIZE_THREAD__)
  return {};
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return {};
#endif
#endif
  constexpr uintptr_t kLow = uintptr_t{32} << 40, kHigh = uintptr_t{96} << 40;
  const uintptr_t step = AlignUp(bytes, uintptr_t{1} << 30);
  if (sizeof(void*) != 8 || step >= (kHigh - kLow) / 4) return {};
  const uint64_t slots = (kHigh - kLow) / step;
  const uint64_t hash = Fnv1a(key.data(), key.size());
  std::vector<uintptr_t> candidates;
  for (uint64_t i = 0; i < 16 && i < slots; ++i) {
    candidates.push_back(kLow + ((hash + i) % slots) * step);
  }
  return candidates;
}

std::string SocketName(const NodeRangeOptions& o) { return "zero-node-" + o.key; }

absl::Status Validate(const NodeRangeOptions& o) {
  if (o.key.empty() || o.local_world < 1 || o.local_world > NodeRange::kMaxLocalWorld ||
      o.local_rank < 0 || o.local_rank >= o.local_world || o.chunk == 0 ||
      !IsPowerOfTwo(o.chunk) || o.chunk % 4096 != 0 || o.slice_bytes == 0 ||
      o.slice_bytes % o.chunk != 0 || o.timeout <= absl::ZeroDuration() ||
      o.address % o.chunk != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node range '%s': local rank %d of %d (at most %d), slice %s in %s chunks, address %#x: "
        "needs a key, a slice that is a multiple of a power-of-two chunk of whole pages, a "
        "chunk-aligned address and a positive timeout",
        o.key, o.local_rank, o.local_world, NodeRange::kMaxLocalWorld, FormatBytes(o.slice_bytes),
        FormatBytes(o.chunk), o.address));
  }
  return absl::OkStatus();
}

absl::StatusOr<Fd> CreateMemfd(int local_rank, size_t bytes) {
  const std::string name = absl::StrFormat("zero-node-%d", local_rank);
  Fd fd(memfd_create(name.c_str(), MFD_CLOEXEC));
  if (!fd.valid()) {
    return absl::UnavailableError(absl::StrFormat("memfd_create: %s", std::strerror(errno)));
  }
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("ftruncate(memfd, %s): %s", FormatBytes(bytes), std::strerror(errno)));
  }
  return fd;
}

std::string ReserveFailure(const NodeRangeOptions& o, int rank, int pid, int error,
                           uintptr_t base, size_t bytes, int rounds) {
  return absl::StrFormat(
      "node range '%s': local rank %d (pid %d) cannot reserve %s at %#x: %s%s (tried %d "
      "address%s)",
      o.key, rank, pid, FormatBytes(bytes), base, std::strerror(error),
      error == EEXIST ? ", the address is taken in that process" : "", rounds,
      rounds == 1 ? "" : "es");
}

}  // namespace

class NodeRangeJoin {
 public:
  explicit NodeRangeJoin(const NodeRangeOptions& o)
      : o_(o), deadline_(absl::Now() + o.timeout), total_(o.slice_bytes * o.local_world) {}

  absl::StatusOr<std::shared_ptr<NodeRange>> Run() {
    RETURN_IF_ERROR(Validate(o_));
    if (total_ / o_.local_world != o_.slice_bytes) {
      return absl::InvalidArgumentError("node range: slices overflow the address space");
    }
    if (o_.local_rank == 0) return Lead();
    return Follow();
  }

 private:
  Hello MyHello() const {
    return Hello{kMagic,        o_.local_rank, o_.local_world, static_cast<int32_t>(getpid()),
                 0,             o_.slice_bytes, o_.chunk};
  }

  absl::Status Greet(Fd fd, std::vector<Fd>& peers, std::vector<int>& pids) {
    Hello h{};
    RETURN_IF_ERROR(internal::Receive(fd, &h, sizeof(h), deadline_));
    const Hello mine = MyHello();
    if (h.magic != kMagic || h.local_world != mine.local_world || h.slice != mine.slice ||
        h.chunk != mine.chunk || h.local_rank <= 0 || h.local_rank >= o_.local_world ||
        peers[h.local_rank].valid()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "node range '%s': a process (pid %d) joined as local rank %d of %d with a %s slice in "
          "%s chunks; the leader has %d ranks, a %s slice in %s chunks%s",
          o_.key, h.pid, h.local_rank, h.local_world, FormatBytes(h.slice), FormatBytes(h.chunk),
          o_.local_world, FormatBytes(o_.slice_bytes), FormatBytes(o_.chunk),
          h.local_rank > 0 && h.local_rank < o_.local_world && peers[h.local_rank].valid()
              ? " (that rank joined twice)"
              : ""));
    }
    pids[h.local_rank] = h.pid;
    peers[h.local_rank] = std::move(fd);
    return absl::OkStatus();
  }

  absl::Status AcceptAll(const Fd& listener, std::vector<Fd>& peers, std::vector<int>& pids) {
    for (int joined = 1; joined < o_.local_world; ++joined) {
      absl::StatusOr<Fd> fd = internal::Accept(listener, deadline_);
      if (!fd.ok()) {
        std::vector<int> missing;
        for (int l = 1; l < o_.local_world; ++l) {
          if (!peers[l].valid()) missing.push_back(l);
        }
        return absl::DeadlineExceededError(absl::StrFormat(
            "node range '%s': local rank%s %s did not join within %s", o_.key,
            missing.size() == 1 ? "" : "s", absl::StrJoin(missing, ", "),
            absl::FormatDuration(o_.timeout)));
      }
      RETURN_IF_ERROR(Greet(*std::move(fd), peers, pids));
    }
    return absl::OkStatus();
  }

  // Rounds of proposals until every process reserved the same base: the
  // quiet middle of the address space first (Candidates), then wherever
  // the process that failed last has room.
  absl::StatusOr<uintptr_t> Agree(std::vector<Fd>& peers, const std::vector<int>& pids) {
    const std::vector<uintptr_t> middle =
        o_.address != 0 ? std::vector<uintptr_t>{o_.address} : Candidates(total_, o_.key);
    const int rounds = o_.address != 0 ? 1 : static_cast<int>(middle.size()) + kRounds;
    uintptr_t proposal = middle.empty() ? FreeSpot(total_, o_.chunk) : middle[0];
    for (int round = 1;; ++round) {
      for (int l = 1; l < o_.local_world; ++l) {
        RETURN_IF_ERROR(internal::Send(peers[l], &proposal, sizeof(proposal)));
      }
      std::vector<Reply> replies(o_.local_world);
      replies[0].error = TryReserve(proposal, total_);
      if (replies[0].error != 0) replies[0].free_spot = FreeSpot(total_, o_.chunk);
      for (int l = 1; l < o_.local_world; ++l) {
        RETURN_IF_ERROR(internal::Receive(peers[l], &replies[l], sizeof(Reply), deadline_));
      }
      int failed = -1;
      for (int l = 0; l < o_.local_world && failed < 0; ++l) {
        if (replies[l].error != 0) failed = l;
      }
      uintptr_t next = 0;
      if (failed >= 0 && round < rounds) {
        next = round < static_cast<int>(middle.size()) ? middle[round] : replies[failed].free_spot;
      }
      const bool retry = next != 0;
      Verdict verdict{failed < 0, retry, failed, failed < 0 ? 0 : replies[failed].error,
                      failed < 0 ? 0 : pids[failed], 0, retry ? next : proposal};
      for (int l = 1; l < o_.local_world; ++l) {
        RETURN_IF_ERROR(internal::Send(peers[l], &verdict, sizeof(verdict)));
      }
      if (failed < 0) return proposal;
      if (replies[0].error == 0) munmap(reinterpret_cast<void*>(proposal), total_);
      if (!retry) {
        return absl::FailedPreconditionError(ReserveFailure(
            o_, failed, pids[failed], replies[failed].error, proposal, total_, round));
      }
      proposal = next;
    }
  }

  absl::StatusOr<std::shared_ptr<NodeRange>> Lead() {
    ASSIGN_OR_RETURN(Fd listener, internal::Listen(SocketName(o_)));
    std::vector<Fd> peers(o_.local_world);
    std::vector<int> pids(o_.local_world);
    pids[0] = getpid();
    RETURN_IF_ERROR(AcceptAll(listener, peers, pids));
    ASSIGN_OR_RETURN(const uintptr_t base, Agree(peers, pids));
    std::shared_ptr<NodeRange> range(new NodeRange(o_, base));
    ASSIGN_OR_RETURN(Fd own, CreateMemfd(0, FileBytes(*range)));
    std::vector<Fd> fds(o_.local_world);
    fds[0] = std::move(own);
    for (int l = 1; l < o_.local_world; ++l) {
      std::vector<Fd> got;
      int32_t marker = 0;
      RETURN_IF_ERROR(internal::Receive(peers[l], &marker, sizeof(marker), deadline_, &got, 1));
      if (got.size() != 1) return absl::DataLossError("node range: a peer sent no memfd");
      fds[l] = std::move(got[0]);
    }
    Table table{};
    std::vector<int> raw;
    for (int l = 0; l < o_.local_world; ++l) {
      table.pids[l] = pids[l];
      raw.push_back(fds[l].get());
    }
    for (int l = 1; l < o_.local_world; ++l) {
      RETURN_IF_ERROR(internal::Send(peers[l], &table, sizeof(table), raw));
    }
    RETURN_IF_ERROR(Adopt(*range, fds, table));
    return range;
  }

  absl::StatusOr<std::shared_ptr<NodeRange>> Follow() {
    ASSIGN_OR_RETURN(Fd leader, internal::Connect(SocketName(o_), deadline_));
    const Hello hello = MyHello();
    RETURN_IF_ERROR(internal::Send(leader, &hello, sizeof(hello)));
    uintptr_t base = 0;
    for (int round = 1;; ++round) {
      RETURN_IF_ERROR(internal::Receive(leader, &base, sizeof(base), deadline_));
      Reply reply{TryReserve(base, total_), 0, 0};
      if (reply.error != 0) reply.free_spot = FreeSpot(total_, o_.chunk);
      RETURN_IF_ERROR(internal::Send(leader, &reply, sizeof(reply)));
      Verdict verdict{};
      RETURN_IF_ERROR(internal::Receive(leader, &verdict, sizeof(verdict), deadline_));
      if (verdict.agreed) break;
      if (reply.error == 0) munmap(reinterpret_cast<void*>(base), total_);
      if (!verdict.retry) {
        return absl::FailedPreconditionError(ReserveFailure(
            o_, verdict.failed_rank, verdict.failed_pid, verdict.error, base, total_, round));
      }
    }
    std::shared_ptr<NodeRange> range(new NodeRange(o_, base));
    ASSIGN_OR_RETURN(Fd own, CreateMemfd(o_.local_rank, FileBytes(*range)));
    const int32_t marker = o_.local_rank;
    const int raw = own.get();
    RETURN_IF_ERROR(internal::Send(leader, &marker, sizeof(marker), {&raw, 1}));
    Table table{};
    std::vector<Fd> fds;
    RETURN_IF_ERROR(internal::Receive(leader, &table, sizeof(table), deadline_, &fds,
                                      o_.local_world));
    if (static_cast<int>(fds.size()) != o_.local_world) {
      return absl::DataLossError("node range: the leader sent too few memfds");
    }
    fds[o_.local_rank] = std::move(own);  // ours, not the copy that came back
    RETURN_IF_ERROR(Adopt(*range, fds, table));
    return range;
  }

  size_t FileBytes(const NodeRange& range) const {
    return range.slice_ + range.header_bytes() + NodeRange::kMailboxBytes;
  }

  // The range takes the descriptors and the pids (a pidfd each, to tell
  // when a peer exits), then maps every header.
  absl::Status Adopt(NodeRange& range, std::vector<Fd>& fds, const Table& table) {
    for (int l = 0; l < o_.local_world; ++l) {
      NodeRange::View& view = range.views_[l];
      view.fd = fds[l].release();
      view.pid = table.pids[l];
      if (l != o_.local_rank) view.pidfd = static_cast<int>(syscall(SYS_pidfd_open, view.pid, 0));
    }
    return range.MapHeaders();
  }

  const NodeRangeOptions& o_;
  const absl::Time deadline_;
  const size_t total_;
};

absl::StatusOr<std::shared_ptr<NodeRange>> NodeRange::Join(const NodeRangeOptions& options) {
  return NodeRangeJoin(options).Run();
}

}  // namespace zero
