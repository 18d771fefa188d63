"""Issue 37 under torchrun with --nnodes=2 on one machine (two launchers, a
c10d rendezvous), so LOCAL_WORLD_SIZE and the node ranks are torchrun's own:
the package's communicator is hierarchical there (stages agree bit for bit:
every reduction sums each node, then the nodes), counts bytes across
nodes, ZeRO++'s DeepSpeed keys train with fewer of them, and hybrid
sharding (mics_shard_size, zero.shard_group_size) gives the same bits with
the optimizer state of its group."""

import json

from conftest import torchrun_nodes

STEPS = 6
_S3 = {"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0}


def test_two_nodes_hierarchical_and_zeropp(tmp_path):
    zpp = dict(_S3, zero_quantized_weights=True, zero_quantized_gradients=True,
               zero_hpz_partition_size=2)
    cases = {
        "stage0": {"config": {"zero_optimization": {"stage": 0}}},
        "stage2": {"config": {"zero_optimization": {"stage": 2}}},
        "stage3": {"config": {"zero_optimization": _S3}},
        "flat_stage3": {"config": {"zero_optimization": _S3, "zero": {"hierarchical": False}}},
        "zeropp": {"config": {"zero_optimization": zpp}},
        # Hybrid sharding in groups of 2 (DeepSpeed's key, FSDP2-style own key).
        "mics": {"config": {"zero_optimization": dict(_S3, mics_shard_size=2)}},
        "hsdp": {"config": {"zero_optimization": {"stage": 2}, "zero": {"shard_group_size": 2}}},
    }
    cases_file, out = tmp_path / "cases.json", tmp_path / "results.json"
    cases_file.write_text(json.dumps(cases))
    torchrun_nodes(2, 2, "zero_worker.py", ["--cases", cases_file, "--out", out,
                                            "--steps", STEPS])
    results = json.loads(out.read_text())
    for name, r in results.items():
        assert r["ranks_agree"], name
    # Every reduction sums each node, then the nodes: the same bits at every
    # stage, and sharding in groups (hybrid) changes nothing in the arithmetic.
    assert len({results[n]["digest"] for n in ("stage0", "stage2", "stage3", "mics", "hsdp")}) == 1
    # Hybrid: the optimizer state of 2 ranks, not 4.
    state = {n: results[n]["stats"]["pool"]["tags"]["optimizer_state"]["current"]
             for n in ("stage3", "mics")}
    assert 1.8 < state["mics"] / state["stage3"] < 2.2, state
    for name in ("stage3", "flat_stage3"):
        assert results[name]["concatenated_max_diff"] < 0.01, results[name]
    levels = {n: r["stats"]["levels"] for n, r in results.items()}
    # Rank 0 is not a node's last rank: in a flat ring nothing of its leaves
    # the node; hierarchical, its own link carries its share across.
    assert levels["flat_stage3"]["across"]["bytes_sent"] == 0
    assert levels["stage3"]["across"]["bytes_sent"] > 0
    # ZeRO++: int8 gathers (backward's inside the node, hpZ), int4 gradients.
    assert levels["zeropp"]["across"]["bytes_sent"] * 4 < levels["stage3"]["across"]["bytes_sent"]
    plain, zeropp = results["stage3"]["losses"], results["zeropp"]["losses"]
    assert zeropp[-1] < zeropp[0]
    assert abs(zeropp[-1] - plain[-1]) < 0.03 * plain[-1], (zeropp, plain)


def test_a_hybrid_checkpoint_is_one_groups_and_resumes_anywhere(tmp_path):
    """Hybrid sharding (groups of 2 on 2 nodes): the checkpoint holds the
    first group's 2 files; resumed with the same setting or at plain stage 3
    over all 4 processes, training ends with the uninterrupted run's bits
    (every reduction sums each node, then the nodes, at every stage)."""
    out = tmp_path / "digests.json"
    torchrun_nodes(2, 2, "hybrid_ckpt_worker.py", ["--dir", tmp_path / "ckpt", "--out", out])
    digests = json.loads(out.read_text())
    assert digests["files"] == ["rank-00000-of-00002.bin", "rank-00001-of-00002.bin"], digests
    assert digests["hybrid"] == digests["uninterrupted"], digests
    assert digests["stage3"] == digests["uninterrupted"], digests
