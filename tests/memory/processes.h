// Runs a test body in N forked processes (a node's ranks, as torchrun runs
// them) and collects their exits. Each child returns "" for success or what
// went wrong; a child that crashes or hangs past the deadline is reported.
// A small shared board (anonymous shared memory mapped before the fork)
// lets the children exchange words and meet at barriers.
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace zero::testing {

struct Board {
  std::atomic<uint64_t> arrived[8];  // barrier generations, per round
  uint64_t words[64][16];            // words[rank][i]: what rank posts
};

class Processes {
 public:
  Processes() {
    void* p = mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    board_ = static_cast<Board*>(p);
    std::memset(static_cast<void*>(board_), 0, sizeof(Board));
  }
  ~Processes() { munmap(board_, sizeof(Board)); }

  Board& board() { return *board_; }

  // All `n` children meet: round `round` (0..7), each round used once.
  void Barrier(int round, int n) {
    board_->arrived[round].fetch_add(1);
    while (board_->arrived[round].load() < static_cast<uint64_t>(n)) usleep(100);
  }

  // One string per child: "" when it returned "" and exited 0, else why not.
  std::vector<std::string> Run(int n, const std::function<std::string(int)>& body,
                               absl::Duration limit = absl::Seconds(60)) {
    std::vector<pid_t> pids;
    std::vector<int> pipes;
    for (int r = 0; r < n; ++r) {
      int fds[2];
      if (pipe(fds) != 0) return {"pipe failed"};
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        const std::string error = body(r);
        if (!error.empty()) (void)!write(fds[1], error.data(), error.size());
        close(fds[1]);
        _exit(error.empty() ? 0 : 1);
      }
      close(fds[1]);
      pids.push_back(pid);
      pipes.push_back(fds[0]);
    }
    std::vector<std::string> results(n);
    const absl::Time deadline = absl::Now() + limit;
    for (int r = 0; r < n; ++r) {
      int status = 0;
      while (waitpid(pids[r], &status, WNOHANG) == 0) {
        if (absl::Now() > deadline) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status, 0);
          results[r] = "hung past the limit";
          break;
        }
        usleep(1000);
      }
      std::string text;
      char buffer[4096];
      for (ssize_t got; (got = read(pipes[r], buffer, sizeof(buffer))) > 0;) text.append(buffer, got);
      close(pipes[r]);
      if (!results[r].empty()) continue;
      if (WIFSIGNALED(status)) {
        results[r] = absl::StrFormat("killed by signal %d %s", WTERMSIG(status), text);
      } else if (WEXITSTATUS(status) != 0) {
        results[r] = text.empty() ? absl::StrFormat("exit %d", WEXITSTATUS(status)) : text;
      }
    }
    return results;
  }

 private:
  Board* board_;
};

// A key no other test or run uses.
inline std::string UniqueKey(const char* name) {
  return absl::StrFormat("%s-%d-%d", name, getpid(), static_cast<int>(absl::ToUnixMicros(absl::Now()) % 1000000));
}

}  // namespace zero::testing
