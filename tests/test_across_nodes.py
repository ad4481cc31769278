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
