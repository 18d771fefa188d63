"""The node's collectives through its shared range (memory/node_range.h,
zero/comm/node_communicator.h: peers' buffers read in place) against gloo's
on the same processes, buffers and sizes (CPU):

    torchrun --nproc_per_node=4 bench/python/node_collectives.py

For each size (the all-gather's output and the reduce-scatter's input per
rank, 64 KiB to 64 MiB of fp32) prints the median time of the range's
call, of the package's gloo path (zero.wrap's callbacks without the range:
rank-ordered, an all-to-all then a rank-order sum) and of gloo's own
collective (all_gather_into_tensor, reduce_scatter_tensor), and the ratio
of the faster gloo to the range (issue 43's goal: >= 3 from 1 MiB). Every
call is synchronous; a timed call starts after a barrier, so the slowest
rank's time is what each rank sees."""

import argparse
import ctypes
import statistics
import time
import uuid

import torch
import torch.distributed as dist

from zero import _comm, _lib


def _node(lib, rank, world):
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        store.set("bench/node_key", uuid.uuid4().hex)
    key = store.get("bench/node_key")
    devices, comm = ctypes.c_void_p(), ctypes.c_void_p()
    _lib.check(lib.zero_devices_create_node(ctypes.byref(devices), b"host:1x8GiB", rank, world,
                                            key, 60.0), "node devices")
    _lib.check(lib.zero_comm_create_node(ctypes.byref(comm), devices, 60.0), "node comm")
    return devices, comm


def _buffer(lib, devices, nbytes):
    ptr = ctypes.c_void_p()
    _lib.check(lib.zero_devices_allocate(devices, 0, nbytes, ctypes.byref(ptr)), "allocate")
    return ptr.value


def _median_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--max_mib", type=int, default=64)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    lib = _lib.lib()
    devices, comm = _node(lib, rank, world)
    ordered = _comm.ProcessGroupCollectives(None, True)
    sizes = [64 << 10]
    while sizes[-1] < args.max_mib << 20:
        sizes.append(sizes[-1] * 4)
    big = sizes[-1]
    send, recv = _buffer(lib, devices, big), _buffer(lib, devices, big)
    send_t = _comm._tensor(send, big // 4, torch.float32)
    recv_t = _comm._tensor(recv, big // 4, torch.float32)
    send_t.copy_(torch.randn(big // 4, generator=torch.Generator().manual_seed(rank)))
    rows = []
    for size in sizes:
        count = size // 4 // world  # elements each rank contributes or receives
        ag = {
            "range": lambda: _lib.check(lib.zero_comm_all_gather(comm, send, recv, count,
                                                                 _lib.F32), "all-gather"),
            "package gloo": lambda: ordered._all_gather(send, recv, count, _lib.F32),
            "gloo": lambda: dist.all_gather_into_tensor(recv_t[:count * world],
                                                        send_t[:count]),
        }
        rs = {
            "range": lambda: _lib.check(lib.zero_comm_reduce_scatter(
                comm, send, recv, count, _lib.F32, _lib.SUM), "reduce-scatter"),
            "package gloo": lambda: ordered._reduce_scatter(send, recv, count, _lib.F32,
                                                            _lib.SUM),
            "gloo": lambda: dist.reduce_scatter_tensor(recv_t[:count], send_t[:count * world]),
        }
        for name, fns in (("all-gather", ag), ("reduce-scatter", rs)):
            for fn in fns.values():  # warm: pages touched, views mapped
                fn()
            ms = {k: _median_ms(fn, args.repeats) for k, fn in fns.items()}
            rows.append((name, size, ms))
    if rank == 0:
        print("%d processes, fp32, median of %d synchronous calls (ms)" % (world, args.repeats))
        print("%-15s %9s %9s %13s %9s %11s" % ("", "size", "range", "package gloo", "gloo",
                                              "gloo/range"))
        for name, size, ms in rows:
            best = min(ms["package gloo"], ms["gloo"])
            print("%-15s %8dK %9.3f %13.3f %9.3f %11.2f" % (
                name, size >> 10, ms["range"], ms["package gloo"], ms["gloo"],
                best / ms["range"]))
    dist.barrier()
    lib.zero_comm_destroy(comm)
    dist.destroy_process_group()
    lib.zero_devices_destroy(devices)


if __name__ == "__main__":
    main()
