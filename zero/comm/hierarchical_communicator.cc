#include "zero/comm/hierarchical_communicator.h"

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "zero/comm/internal/stream_scratch.h"

namespace zero {

class HierarchyLatch {
 public:
  explicit HierarchyLatch(int world_size) : subs_(world_size) {}

  void Join(int rank, Communicator* intra, Communicator* inter) {
    MutexLock lock(mu_);
    subs_[rank] = {intra, inter};
  }
  // Before a rank's sub-communicators are destroyed.
  void Leave(int rank) {
    MutexLock lock(mu_);
    subs_[rank] = {};
  }
  void Fail(const absl::Status& reason) {
    MutexLock lock(mu_);
    if (failed_.ok()) failed_ = reason.ok() ? absl::CancelledError("aborted") : reason;
    for (const auto& [intra, inter] : subs_) {
      if (intra != nullptr) intra->Abort(failed_);
      if (inter != nullptr) inter->Abort(failed_);
    }
  }
  absl::Status status() const {
    MutexLock lock(mu_);
    if (!failed_.ok()) return failed_;
    for (const auto& [intra, inter] : subs_) {
      for (const Communicator* sub : {intra, inter}) {
        if (sub == nullptr) continue;
        if (absl::Status s = sub->AsyncError(); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  mutable Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<Communicator*, Communicator*>> subs_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<HierarchyLatch> MakeHierarchyLatch(int world_size) {
  return std::make_shared<HierarchyLatch>(world_size);
}

namespace {

const char* At(const void* base, size_t elements, DType dtype) {
  return static_cast<const char*>(base) + elements * SizeOf(dtype);
}
char* At(void* base, size_t elements, DType dtype) {
  return static_cast<char*>(base) + elements * SizeOf(dtype);
}

class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(const Topology& topology, int rank,
                           std::unique_ptr<Communicator> intra,
                           std::unique_ptr<Communicator> inter, MemoryResource* scratch,
                           std::shared_ptr<HierarchyLatch> latch)
      : topology_(topology),
        rank_(rank),
        intra_(std::move(intra)),
        inter_(std::move(inter)),
        scratch_(scratch),
        latch_(std::move(latch)) {
    latch_->Join(rank_, intra_.get(), inter_.get());
  }
  ~HierarchicalCommunicator() override { latch_->Leave(rank_); }

  int rank() const override { return rank_; }
  int world_size() const override { return topology_.world_size(); }
  Topology topology() const override { return topology_; }
  void Abort(const absl::Status& reason) override { latch_->Fail(reason); }
  std::optional<Levels> levels() override { return Levels{intra_.get(), inter_.get()}; }
  absl::Status AsyncError() const override { return latch_->status(); }

  // The logical calls by kind (the flat model); the levels and the bytes
  // moved as the two groups counted them.
  CommStats stats() const override {
    CommStats total = Communicator::stats();
    // By role, whatever topology the two were told: the node's group stays
    // inside, the other's every link crosses between nodes.
    const CommStats intra = intra_->stats(), inter = inter_->stats();
    const OpStats in = intra.Total(), out = inter.Total();
    total.inside = {in.bytes_sent, in.bytes_received};
    total.across = {out.bytes_sent, out.bytes_received};
    total.copied_bytes += intra.copied_bytes + inter.copied_bytes;
    total.reduced_bytes += intra.reduced_bytes + inter.reduced_bytes;
    return total;
  }

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override {
    absl::Status status = invalid;
    if (status.ok() && call.op == ReduceOp::kAvg &&
        (call.kind == CollectiveKind::kReduceScatter || call.kind == CollectiveKind::kAllReduce)) {
      status = absl::InvalidArgumentError(absl::StrFormat(
          "%s on rank %d: hierarchical collectives reduce with sum or max (an average per "
          "step would divide by the wrong count); sum, then scale",
          call.ToString(), rank_));
    }
    if (status.ok()) status = latch_->status();  // a failed group fails fast
    if (status.ok()) status = Dispatch(call, send, recv, stream);
    if (!status.ok()) latch_->Fail(status);  // so that no peer waits for this rank
    return status;
  }

 private:
  int nodes() const { return topology_.nodes(); }
  int per_node() const { return topology_.ranks_per_node(); }
  int node() const { return topology_.node_of(rank_); }
  int local() const { return topology_.local_rank(rank_); }

  absl::Status Dispatch(const CollectiveCall& call, const void* send, void* recv,
                        Stream* stream) {
    switch (call.kind) {
      case CollectiveKind::kAllGather:
        return AllGatherSteps(send, recv, call.count, call.dtype, stream);
      case CollectiveKind::kReduceScatter:
        return ReduceScatterSteps(send, recv, call.count, call.dtype, call.op, stream);
      case CollectiveKind::kAllReduce:
        return AllReduceSteps(send, recv, call.count, call.dtype, call.op, stream);
      case CollectiveKind::kBroadcast:
        return BroadcastSteps(send, recv, call.count, call.dtype, call.root, stream);
      case CollectiveKind::kAllToAll:
        return AllToAllSteps(send, recv, call.count, call.dtype, stream);
      case CollectiveKind::kBarrier:
        RETURN_IF_ERROR(intra_->Barrier(stream));
        RETURN_IF_ERROR(inter_->Barrier(stream));
        return intra_->Barrier(stream);
    }
    return absl::InternalError("unknown collective kind");
  }

  // Inter first, so each chunk crosses once: rank (n, l) gathers the chunks
  // of local rank l on every node, then each node block m is gathered
  // inside the node into recv's block m.
  absl::Status AllGatherSteps(const void* send, void* recv, size_t count, DType dtype,
                              Stream* stream) {
    StreamScratch scratch(scratch_, stream);
    ASSIGN_OR_RETURN(void* column, scratch.Get(nodes() * count * SizeOf(dtype)));
    RETURN_IF_ERROR(inter_->AllGather(send, column, count, dtype, stream));
    for (int m = 0; m < nodes(); ++m) {
      RETURN_IF_ERROR(intra_->AllGather(At(column, m * count, dtype),
                                        At(recv, m * per_node() * count, dtype), count, dtype,
                                        stream));
    }
    return absl::OkStatus();
  }

  // Intra first: node block m's chunk l summed inside the node (local rank
  // order), then the node sums of this rank's column reduced across nodes.
  absl::Status ReduceScatterSteps(const void* send, void* recv, size_t count, DType dtype,
                                  ReduceOp op, Stream* stream) {
    StreamScratch scratch(scratch_, stream);
    ASSIGN_OR_RETURN(void* column, scratch.Get(nodes() * count * SizeOf(dtype)));
    for (int m = 0; m < nodes(); ++m) {
      RETURN_IF_ERROR(intra_->ReduceScatter(At(send, m * per_node() * count, dtype),
                                            At(column, m * count, dtype), count, dtype, op,
                                            stream));
    }
    return inter_->ReduceScatter(column, recv, count, dtype, op, stream);
  }

  absl::Status AllReduceSteps(const void* send, void* recv, size_t count, DType dtype,
                              ReduceOp op, Stream* stream) {
    const size_t chunk = count / world_size();
    const size_t body = chunk * world_size();
    if (chunk > 0) {
      void* mine = At(recv, rank_ * chunk, dtype);
      RETURN_IF_ERROR(ReduceScatterSteps(send, mine, chunk, dtype, op, stream));
      RETURN_IF_ERROR(AllGatherSteps(mine, recv, chunk, dtype, stream));
    }
    // The tail (fewer than N elements) in the same order: node, then nodes.
    const size_t tail = count - body;
    const void* tail_send = tail > 0 ? At(send, body, dtype) : nullptr;
    void* tail_recv = tail > 0 ? At(recv, body, dtype) : nullptr;
    RETURN_IF_ERROR(intra_->AllReduce(tail_send, tail_recv, tail, dtype, op, stream));
    return inter_->AllReduce(tail_recv, tail_recv, tail, dtype, op, stream);
  }

  // Node block m of the send (the chunks for node m's ranks) goes inside the
  // node to the local rank that has the same place on node m; then each
  // rank sends node m what it collected for it. The layouts line up: no
  // copies. The bytes across are a flat all-to-all's, in fewer messages.
  absl::Status AllToAllSteps(const void* send, void* recv, size_t count, DType dtype,
                             Stream* stream) {
    StreamScratch scratch(scratch_, stream);
    const size_t block = per_node() * count;
    ASSIGN_OR_RETURN(void* staged, scratch.Get(nodes() * block * SizeOf(dtype)));
    for (int m = 0; m < nodes(); ++m) {
      RETURN_IF_ERROR(intra_->AllToAll(At(send, m * block, dtype), At(staged, m * block, dtype),
                                       count, dtype, stream));
    }
    return inter_->AllToAll(staged, recv, block, dtype, stream);
  }

  absl::Status BroadcastSteps(const void* send, void* recv, size_t count, DType dtype, int root,
                              Stream* stream) {
    const int root_local = topology_.local_rank(root);
    if (local() == root_local) {
      RETURN_IF_ERROR(
          inter_->Broadcast(send, recv, count, dtype, topology_.node_of(root), stream));
    }
    return intra_->Broadcast(recv, recv, count, dtype, root_local, stream);
  }

  const Topology topology_;
  const int rank_;
  const std::unique_ptr<Communicator> intra_;
  const std::unique_ptr<Communicator> inter_;
  MemoryResource* const scratch_;
  const std::shared_ptr<HierarchyLatch> latch_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeHierarchicalCommunicator(
    const Topology& topology, int rank, std::unique_ptr<Communicator> intra,
    std::unique_ptr<Communicator> inter, MemoryResource* scratch,
    std::shared_ptr<HierarchyLatch> latch) {
  if (intra == nullptr || inter == nullptr || scratch == nullptr) {
    return absl::InvalidArgumentError(
        "hierarchical communicator: intra, inter and scratch must not be null");
  }
  if (rank < 0 || rank >= topology.world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "hierarchical communicator: rank %d outside world size %d", rank, topology.world_size()));
  }
  const int node = topology.node_of(rank), local = topology.local_rank(rank);
  if (intra->world_size() != topology.ranks_per_node() || intra->rank() != local ||
      inter->world_size() != topology.nodes() || inter->rank() != node) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "hierarchical communicator for rank %d (node %d, local rank %d of %d ranks per node, "
        "%d nodes): intra is rank %d of %d, inter rank %d of %d",
        rank, node, local, topology.ranks_per_node(), topology.nodes(), intra->rank(),
        intra->world_size(), inter->rank(), inter->world_size()));
  }
  if (latch == nullptr) latch = MakeHierarchyLatch(topology.world_size());
  return std::make_unique<HierarchicalCommunicator>(topology, rank, std::move(intra),
                                                    std::move(inter), scratch, std::move(latch));
}

}  // namespace zero
