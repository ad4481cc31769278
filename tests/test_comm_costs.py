"""The collectives of today's layouts (ppbook.cost_model.step_work, ppbook.links) against
what they were not built from: a numeric ring simulation that moves real chunks between
ranks and counts the bytes, the published ring formulas (nccl-tests' PERFORMANCE.md), the
ZeRO paper's communication volumes (Rajbhandari et al. 2020, arXiv:1910.02054, sec. 7),
Megatron-LM's per-layer count (Narayanan et al. 2021, sec. 3.2) and a routing count."""

import numpy as np
import pytest

from ppbook.cost_model.model_shape import ModelShape, Parallel
from ppbook.cost_model.step_work import (
    ADAM_STEP_BYTES,
    COLLECTIVE_EFFICIENCY,
    accumulate_bytes,
    adam_step_bytes,
    all_to_all_s,
    collective_s,
    cp_collectives,
    dp_collectives,
    ep_collectives,
    ring_bytes,
    tp_collectives,
)
from ppbook.links import collective_gbps, pipeline_message_bytes


def simulate_ring(n: int, size: int, kind: str) -> tuple[list[np.ndarray], list[int]]:
    """Run a ring collective over ``n`` ranks on arrays of ``size`` float32 elements,
    chunk by chunk; return each rank's result and the bytes each rank sent."""
    rng = np.random.default_rng(n)
    data = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]
    chunks = [np.array_split(x.copy(), n) for x in data]
    sent = [0] * n

    def reduce_scatter():
        for step in range(n - 1):
            moves = []
            for r in range(n):
                c = (r - step) % n
                moves.append(((r + 1) % n, c, chunks[r][c].copy()))
                sent[r] += chunks[r][c].nbytes
            for dst, c, piece in moves:
                chunks[dst][c] = chunks[dst][c] + piece

    def all_gather(owner):  # rank r owns chunk owner(r)
        for step in range(n - 1):
            moves = []
            for r in range(n):
                c = (owner(r) - step) % n
                moves.append(((r + 1) % n, c, chunks[r][c].copy()))
                sent[r] += chunks[r][c].nbytes
            for dst, c, piece in moves:
                chunks[dst][c] = piece

    if kind in ("reduce-scatter", "all-reduce"):
        reduce_scatter()
        if kind == "reduce-scatter":
            return [chunks[r][(r + 1) % n] for r in range(n)], sent
        all_gather(lambda r: (r + 1) % n)
        return [np.concatenate(chunks[r]) for r in range(n)], sent
    all_gather(lambda r: r)
    return [np.concatenate(chunks[r]) for r in range(n)], sent


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_bytes_are_what_a_simulated_ring_sends(n):
    size = 24 * n  # whole chunks
    nbytes = size * 4
    total = None
    for kind in ("all-reduce", "reduce-scatter", "all-gather"):
        results, sent = simulate_ring(n, size, kind)
        assert all(x == ring_bytes(kind, nbytes, n) for x in sent), kind
        if kind == "all-reduce":
            rng = np.random.default_rng(n)
            total = sum(rng.standard_normal(size).astype(np.float32) for _ in range(n))
            assert all(np.allclose(x, total, atol=1e-5) for x in results)
    # A reduce-scatter then an all-gather send what one all-reduce does.
    both = ring_bytes("reduce-scatter", nbytes, n) + ring_bytes("all-gather", nbytes, n)
    assert both == ring_bytes("all-reduce", nbytes, n)


@pytest.mark.parametrize("n", [2, 4, 8, 64])
def test_an_all_to_all_sends_all_but_its_own_share(n):
    # Each rank's buffer split into n pieces, piece j to rank j: it keeps 1/n.
    buffer = 1_000_000 * n
    kept = buffer / n
    assert ring_bytes("all-to-all", buffer, n) == pytest.approx(buffer - kept)
    assert ring_bytes("all-to-all", buffer, 1) == 0.0


def test_collective_time_is_bus_bytes_over_the_efficient_link():
    # 1 GB all-reduced over 8 ranks on NVLink 4 (450 GB/s each way): 2 * 7/8 GB at 80 %.
    assert collective_s("all-reduce", 1e9, 8, 450) == pytest.approx(1.75 / (0.8 * 450))
    assert COLLECTIVE_EFFICIENCY == 0.8
    with pytest.raises(ValueError, match="collective must be one of"):
        ring_bytes("broadcast", 1.0, 2)


def test_tp_with_sequence_parallelism_moves_an_all_reduces_bytes():
    # Megatron-LM: 4 all-reduces of b s h a layer per micro-batch (2 forward, 2 backward),
    # 8 b s h (t-1)/t elements sent per device (Narayanan et al. 2021, sec. 3.2).
    shape = ModelShape(1, 4096, 32, 1000, 2048)
    for sp in (False, True):
        tp = tp_collectives(shape, Parallel(tp=8, sp=sp))
        sent = sum(c.sent for key in ("F", "I") for c in tp[key])
        assert sent == pytest.approx(8 * 2048 * 4096 * 7 / 8 * 2)
        kinds = {c.kind for c in tp["F"]}
        assert kinds == ({"all-gather", "reduce-scatter"} if sp else {"all-reduce"})
    full = tp_collectives(shape, Parallel(tp=8, recompute="full"))
    assert sum(c.sent for c in full["I"]) == 2 * sum(c.sent for c in full["F"])


def test_expert_all_to_all_bytes_match_a_routing_count():
    # 8 experts on ep = 4 ranks (2 each), top-2, 4096 tokens a rank, routed evenly: count
    # the token copies whose expert lives on another rank.
    shape = ModelShape(
        2, 1024, 8, 100, 4096, experts=8, experts_per_token=2, ffn_hidden=2048, gated_mlp=True
    )
    parallel = Parallel(dp=4, ep=4)
    tokens, k, experts, ep = 4096, 2, 8, 4
    for rank in range(ep):
        leaving = sum(
            ((i * k + j + rank) % experts) // (experts // ep) != rank
            for i in range(tokens)
            for j in range(k)
        )
        dispatch = ep_collectives(shape, parallel)["F"][0]
        assert dispatch.sent == leaving * shape.hidden * 2
    forward = ep_collectives(shape, parallel)["F"]
    assert [c.kind for c in forward] == ["all-to-all", "all-to-all"]
    assert sum(c.sent for c in forward) == 2 * tokens * k * 1024 * 2 * (ep - 1) / ep


def test_context_parallel_ring_sends_every_other_ranks_keys_and_values():
    # cp = 4, s = 8192: each rank holds 2048 tokens of K and V (8 KV heads of 128) and
    # passes 3 such blocks in the forward; the backward twice that.
    shape = ModelShape(1, 4096, 32, 1000, 8192, kv_heads=8)
    cp = cp_collectives(shape, Parallel(cp=4))
    block = 2048 * 8 * (128 + 128) * 2
    assert sum(c.sent for c in cp["F"]) == pytest.approx(3 * block)
    assert sum(c.sent for c in cp["I"]) == pytest.approx(6 * block)


def test_zero_stages_move_the_zero_papers_volumes():
    # ZeRO paper sec. 7.2: data parallelism all-reduces 2 psi; ZeRO-1 and -2 move the same
    # 2 psi (reduce-scatter, all-gather); ZeRO-3 3 psi, 1.5 times. Large dp, one micro-batch,
    # 16-bit gradients and parameters.
    psi, dp = 1e9, 1024
    per = (dp - 1) / dp
    sent = {
        z: sum(c.sent for c in dp_collectives(psi, Parallel(dp=dp, zero=z, gradient_bytes=2), 1))
        for z in (0, 1, 2, 3)
    }
    assert sent[0] == pytest.approx(2 * per * 2 * psi)
    assert sent[1] == pytest.approx(sent[0]) and sent[2] == pytest.approx(sent[0])
    assert sent[3] == pytest.approx(1.5 * sent[0])
    # With m micro-batches ZeRO-2 reduce-scatters each one's gradients, FSDP also gathers
    # the parameters twice each: why looped BFS (fewer micro-batch rounds) suits it.
    m = 8
    rs = [c for c in dp_collectives(psi, Parallel(dp=dp, zero=2), m) if c.kind == "reduce-scatter"]
    assert rs[0].count == m
    fsdp = dp_collectives(psi, Parallel(dp=dp, zero=3), m)
    assert {c.kind: c.count for c in fsdp} == {"reduce-scatter": m, "all-gather": 2 * m}
    # Experts' weights are replicated over dp / ep ranks only.
    split = dp_collectives(psi, Parallel(dp=64, ep=8, zero=1), 1, expert_parameters=0.9 * psi)
    assert sorted({c.ranks for c in split}) == [8, 64]


def test_bytes_per_parameter_of_the_optimizer():
    assert adam_step_bytes(Parallel(gradient_bytes=2)) == ADAM_STEP_BYTES == 52
    assert adam_step_bytes(Parallel()) == 46  # fp32 gradients: no conversion
    # Accumulating costs 6 bytes a parameter beyond the timed W either way: bf16 read 2 + 2,
    # write 2; fp32 inside the GEMM (Megatron's fusion) read 4, write 4, less the 2 W wrote.
    assert accumulate_bytes(Parallel(gradient_bytes=2)) == 2 + 2 + 2
    assert accumulate_bytes(Parallel()) == 4 + 4 - 2
    # bf16 everything: to fp32 6, unscale 8, norm 4, Adam read 2+4+2+2 write 2+2+2: 34.
    assert adam_step_bytes(Parallel(gradient_bytes=2, master_bytes=0, moment_bytes=2)) == 34


def test_rails_give_each_gpu_its_own_nic():
    # Two HGX nodes, 8 GPUs each, 8 x 400 Gb/s NICs: a 16-GPU ring crosses nodes on eight
    # NICs at once, 8 x 50 = 400 GB/s, under NVLink's 450; with one member a node, one NIC.
    assert collective_gbps(16, 8, 450, 50) == 400
    assert collective_gbps(16, 1, 450, 50) == 50
    assert collective_gbps(8, 8, 450, 50) == 450  # one node: NVLink
    assert collective_gbps(32, 8, 300, 50) == 300  # NVLink bounds it
    with pytest.raises(ValueError, match="members_per_node <= group_size"):
        collective_gbps(4, 8, 450, 50)


def test_megatron_scatter_gather_sends_one_tth_per_rank():
    whole = 1 * 2048 * 8192 * 2
    message = pipeline_message_bytes(1, 2048, 8192, 2, tp=8)
    assert message == {"sent": whole / 8, "gathered": 7 / 8 * whole}
    assert pipeline_message_bytes(1, 2048, 8192, 2, tp=8, scatter_gather=False) == {
        "sent": whole,
        "gathered": 0.0,
    }
    # Each of the 8 ranks sending 1/8 on its own NIC: the boundary crosses 8 times faster.
    assert 8 * message["sent"] == whole


def test_an_all_to_all_across_nodes_leaves_on_each_gpus_own_nic():
    # ep = 64 over 8 nodes of 8 (DeepSeek-V3's layout): 7/64 of a buffer stays in the node
    # on NVLink, 56/64 leaves on the rank's own 50 GB/s NIC; the NIC is the bottleneck.
    buffer = 64e6
    got = all_to_all_s(buffer, 64, 8, 450, 50)
    assert got == pytest.approx(buffer * 56 / 64 / (0.8 * 50e9))
    # Inside one node it is the ring formula's (n-1)/n on NVLink.
    assert all_to_all_s(buffer, 8, 8, 450, 50) == pytest.approx(
        ring_bytes("all-to-all", buffer, 8) / (0.8 * 450e9)
    )
    # One member a node: everything but its own share leaves on its NIC.
    assert all_to_all_s(buffer, 64, 1, 450, 50) == pytest.approx(
        ring_bytes("all-to-all", buffer, 64) / (0.8 * 50e9)
    )
    with pytest.raises(ValueError, match="members_per_node <= ranks = 4"):
        all_to_all_s(buffer, 4, 8, 450, 50)
