"""Messages across nodes, counted by hand from the V placement."""

from ppbook.across_nodes import messages_across_nodes
from ppbook.links import Link, Topology
from ppbook.schedules import dualpipev, zb_v


def test_overlapped_pairs_send_both_their_messages():
    # p = 4 ranks on two nodes of 2. Rank r holds stages r and 7-r, so a micro-batch's
    # route 0..7 visits ranks 0 1 2 3 3 2 1 0: it crosses nodes between stages 1 and 2 and
    # between 5 and 6, each way: 4 messages per micro-batch, whatever the order; DualPipeV's
    # overlapped pairs (one forward and one backward) send one message each.
    two_nodes = Topology(Link(0.0, 1e9), Link(0.0, 1e8), devices_per_node=2)
    for build in (zb_v, dualpipev):
        assert messages_across_nodes(build(4, 8), two_nodes) == 4 * 8


def test_rails_and_scatter_gather_by_hand():
    # One micro-batch (m = 1, so the step is one F and one B) of a 2-layer model, 16 heads,
    # h = 1024, s = 512, on two nodes of 8: NVLink 450 GB/s, one NIC of 50 GB/s per GPU.
    import pytest

    from ppbook.across_nodes import split_timelines
    from ppbook.cost_model.model_shape import ModelShape

    shape = ModelShape(2, 1024, 16, 100, 512)
    bsh = 512 * 1024 * 2  # bytes of one (b, s, h) message
    hw = {"flops_per_second": 1e14, "intra_gb_per_s": 450.0, "inter_gb_per_s": 50.0}
    flops = 2 * (24 * 512 * 1024**2 + 4 * 512**2 * 1024) + 2 * (
        48 * 512 * 1024**2 + 8 * 512**2 * 1024
    )
    ring16 = 2 * 2 * 2 * 15 / 16 * bsh  # one pass: 2 layers x 2 all-reduces of 2 (15/16) bsh
    # Tensor across the nodes: each device computes 1/16 and all-reduces 8 times (2 layers,
    # 2 per pass, 2 passes); with rails the ring crosses on 8 NICs: min(450, 8 x 50) = 400.
    for rails, gbps in ((True, 400.0), (False, 50.0)):
        got = split_timelines(shape, 1, **hw, rails=rails)["tensor"].makespan
        assert got == pytest.approx(flops / 16 / 1e14 + 2 * ring16 / (gbps * 1e9), rel=1e-12)
    # Pipeline across the nodes: each stage one layer on 8 devices, an all-reduce ring of 8
    # on NVLink; the boundary each way: with scatter/gather 1/8 of it per NIC, then an
    # all-gather of 7/8 of it on NVLink; without, all of it on one NIC.
    ring8 = 2 * 7 / 8 * bsh
    stage = flops / 2 / 8 / 1e14 + 4 * ring8 / 450e9  # F and B of one stage, summed
    for scatter, hop in ((True, bsh / 8 / 50e9 + 7 / 8 * bsh / 450e9), (False, bsh / 50e9)):
        got = split_timelines(shape, 1, **hw, scatter_gather=scatter)["pipeline"].makespan
        assert got == pytest.approx(2 * stage + 2 * hop, rel=1e-12)
