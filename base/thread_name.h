// Names the calling thread as tools see it (/proc/<pid>/task/<tid>/comm,
// top -H, perf, gdb), so a profile can tell the runtime's threads apart:
// zero-stream (a host stream's work), zero-comm (a process group's
// collectives), zero-cpu (the CPU pool), zero-io (state file and pager),
// zero-worker (the offload step's CPU work). Linux keeps 15 bytes; longer
// names are cut. A failure is ignored: a name is for tools only.
#pragma once

namespace zero {

void NameThisThread(const char* name);

}  // namespace zero
