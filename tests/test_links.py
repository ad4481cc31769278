"""The communication model: latency + bytes / bandwidth, contention on each link, sends that
do or do not overlap compute, and links named by a topology of nodes.

Independent answers: timelines worked out by hand (in the comments), a tick-by-tick
reference simulator of the link model written without ppbook.simulate, and the plain
simulator's own brute-force reference (test_simulate) for the default path. Bad input
and the command line's options: test_links_input.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schedule_strategies import valid_schedules
from test_simulate import assert_times, brute_force, chunk_costs

from ppbook.costs import Costs
from ppbook.links import LINKS_CSV, Link, Topology, boundary_bytes, nominal_links
from ppbook.schedule import Action, Schedule
from ppbook.schedules import SCHEDULES, build, gpipe, interleaved_1f1b, one_f_one_b
from ppbook.simulate import simulate


def rows(values) -> list[list[float]]:
    """A timeline's per-rank tuples as lists, to compare with hand-written lists."""
    return [list(row) for row in values]


def tick_reference(schedule: Schedule, f, b, latency, serial, contention, overlap, i=0, w=0):
    """The link model tick by tick, for schedules whose micro-batches pass every stage.

    A pass takes f, b, i or w ticks (F, B, I, W). At each integer time t: (1) actions
    ending at t finish; a forward's output goes to the next stage and a backward's (B or I)
    input gradient to the stage before: to another rank, it queues on the link (sender,
    receiver), and without overlap the sender is blocked until it has left; on its own
    rank it is there at once; (2) each link starts the messages at the head of its queue,
    one at a time while it is busy under contention, all at once without: a message leaves
    ``serial`` after it starts and arrives ``latency`` after it has left; (3) blocked
    senders whose message has left are freed; (4) every free rank starts its next action
    if what it needs is there: F the previous stage's F, a backward its own F and the next
    stage's backward, W its own I. Returns {action: (start, end)} (end: when the rank is
    free again), or None if stuck.
    """
    duration = {"F": f, "B": b, "I": i, "W": w}
    last = schedule.num_stages - 1
    rank_of = schedule.stage_to_rank
    present = {action for row in schedule.actions for action in row}
    rows = schedule.actions
    position, running, blocked = [0] * len(rows), [None] * len(rows), [None] * len(rows)
    finished, arrived, left, timing = {}, {}, {}, {}
    queues: dict[tuple[int, int], list[Action]] = {}
    link_free: dict[tuple[int, int], int] = {}

    def backward(stage: int, mb: int) -> Action:
        action = Action(stage, "B", mb)
        return action if action in present else Action(stage, "I", mb)

    t = 0
    while any(position[r] < len(row) or running[r] or blocked[r] for r, row in enumerate(rows)):
        for rank in range(len(rows)):  # (1)
            if running[rank] and timing[running[rank]][1] == t:
                action = running[rank]
                running[rank] = None
                finished[action] = t
                to = {"F": action.stage + 1, "B": action.stage - 1, "I": action.stage - 1}
                to = to.get(action.kind, -1)
                if not 0 <= to <= last:
                    continue
                if rank_of[to] == rank:
                    arrived[action] = t
                    continue
                queues.setdefault((rank, rank_of[to]), []).append(action)
                if not overlap:
                    blocked[rank] = action
        for link, queue in queues.items():  # (2)
            while queue and (not contention or link_free.get(link, 0) <= t):
                action = queue.pop(0)
                left[action] = t + serial
                arrived[action] = t + serial + latency
                link_free[link] = t + serial
        for rank in range(len(rows)):  # (3)
            action = blocked[rank]
            if action is not None and left.get(action, t + 1) <= t:
                timing[action] = (timing[action][0], t)
                blocked[rank] = None
        for rank, row in enumerate(rows):  # (4)
            if running[rank] or blocked[rank] or position[rank] == len(row):
                continue
            stage, kind, mb = action = row[position[rank]]
            if kind == "F":
                needs_ok = stage == 0 or arrived.get(Action(stage - 1, "F", mb), t + 1) <= t
            elif kind == "W":
                needs_ok = Action(stage, "I", mb) in finished
            else:
                needs_ok = Action(stage, "F", mb) in finished and (
                    stage == last or arrived.get(backward(stage + 1, mb), t + 1) <= t
                )
            if needs_ok:
                timing[action] = (t, t + duration[kind])
                running[rank] = action
                position[rank] += 1
        t += 1
        if t > 10_000:
            return None
    return timing


@settings(max_examples=80, deadline=None)
@given(
    schedule=valid_schedules(),
    f=st.integers(1, 4),
    b=st.integers(1, 4),
    i=st.integers(1, 4),
    w=st.integers(1, 4),
    latency=st.integers(0, 3),
    serial=st.integers(0, 3),
    contention=st.booleans(),
    overlap=st.booleans(),
)
def test_simulator_equals_the_tick_reference_of_the_link_model(
    schedule, f, b, i, w, latency, serial, contention, overlap
):
    """Every example is a valid schedule that finishes (tests/schedule_strategies.py), with
    F and B or split I and W, one or more chunks per rank, in a loop or a V."""
    costs = Costs(
        **chunk_costs(schedule, F=f, B=b, I=i, W=w),
        comm=latency,
        comm_bytes=serial,
        bandwidth=1,
        contention=contention,
        overlap_send=overlap,
    )
    reference = tick_reference(schedule, f, b, latency, serial, contention, overlap, i, w)
    assert_times(simulate(schedule, costs), reference)


@pytest.mark.parametrize("builder", [gpipe, one_f_one_b])
@pytest.mark.parametrize("p, m", [(2, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("latency, serial", [(0, 2), (1, 3), (2, 1)])
def test_gpipe_and_1f1b_equal_the_tick_reference(builder, p, m, latency, serial):
    for contention in (False, True):
        for overlap in (False, True):
            reference = tick_reference(builder(p, m), 2, 3, latency, serial, contention, overlap)
            costs = Costs(
                F=2,
                B=3,
                comm=latency,
                comm_bytes=serial,
                bandwidth=1,
                contention=contention,
                overlap_send=overlap,
            )
            for row in simulate(builder(p, m), costs).intervals:
                for interval in row:
                    assert (interval.start, interval.end) == reference[interval.action]


def test_several_steps_without_sync_keep_each_links_queue_across_steps():
    # Post-validated steps run as one repeated order: its messages queue on the same links.
    costs = Costs(F=1, B=2, comm=1, comm_bytes=3, bandwidth=1, contention=True)
    timeline = simulate(one_f_one_b(3, 4), costs, steps=3, sync="none")
    reference = tick_reference(one_f_one_b(3, 4).repeated(3), 1, 2, 1, 3, True, True)
    for row in timeline.intervals:
        for interval in row:
            assert (interval.start, interval.end) == reference[interval.action]


@settings(max_examples=30, deadline=None)
@given(schedule=valid_schedules(), c=st.integers(0, 3))
def test_default_path_and_a_latency_only_topology_equal_the_plain_brute_force(schedule, c):
    reference = brute_force(schedule, 1, 2, c, 1, 1)
    passes = chunk_costs(schedule, F=1, B=2, I=1, W=1)
    for costs in (Costs(**passes, comm=c), Costs(**passes, topology=Topology(Link(latency=c)))):
        assert_times(simulate(schedule, costs), reference)


@pytest.mark.parametrize("name", [n for n in SCHEDULES if n != "zb-auto"] + ["zb-auto"])
def test_every_schedule_sends_each_message_it_waits_for(name):
    # ppbook.dependencies.sends and needs agree for every kind and placement: timed on its
    # link (a topology of one latency-only link), each message arrives as the default has it.
    schedule = build(name, 4, 8)
    for plain, per_link in (
        (Costs(F=1, I=1, W=1, comm=0.5), Costs(F=1, I=1, W=1, topology=Topology(Link(0.5)))),
        (Costs(F=1, B=2, comm=0.5), Costs(F=1, B=2, comm=0.5, contention=True)),
    ):
        assert simulate(schedule, per_link).starts == simulate(schedule, plain).starts


def test_gpipe_m3_on_a_link_of_2_per_message_with_contention_by_hand():
    # p = 2, F = 1, B = 2, latency 0, 4 bytes at 2 bytes per time unit: 2 per message.
    # Forwards end at 1, 2, 3; queued on link 0->1 they leave at 3, 5, 7 (each waits for
    # the one before): rank 1 runs F at 3, 5, 7 and B at 8, 10, 12, ending 10, 12, 14.
    # Gradients leave link 1->0 at 12, 14, 16: rank 0 runs B at 12, 14, 16; makespan 18.
    # Without contention: arrivals 3, 4, 5 and 10, 12, 14, makespan 16 = (m+p-1)(F+B) + 2*2.
    costs = Costs(F=1, B=2, comm_bytes=4, bandwidth=2, contention=True)
    timeline = simulate(gpipe(2, 3), costs)
    assert rows(timeline.starts) == [[0, 1, 2, 12, 14, 16], [3, 5, 7, 8, 10, 12]]
    assert timeline.makespan == 18
    free = simulate(gpipe(2, 3), Costs(F=1, B=2, comm_bytes=4, bandwidth=2))
    assert rows(free.starts) == [[0, 1, 2, 10, 12, 14], [3, 4, 5, 6, 8, 10]]
    assert free.makespan == 16


def test_latency_is_paid_after_the_link_is_free_not_while_it_is_held():
    # latency 3 and 2 per message: messages leave at 3, 5, 7 and arrive 3 later, 6, 8, 10;
    # a latency that held the link would make them arrive at 6, 11, 16.
    costs = Costs(F=1, B=2, comm=3, comm_bytes=4, bandwidth=2, contention=True)
    assert list(simulate(gpipe(2, 3), costs).starts[1][:3]) == [6, 8, 10]


def test_without_overlap_the_sender_is_busy_for_the_serialisation():
    # The same GPipe m = 3: rank 0 computes F for 1 then sends for 2, so its forwards take
    # [0,3], [3,6], [6,9] and arrive at 3, 6, 9; rank 1's forwards run [3,4], [6,7], [9,10]
    # (the last stage sends nothing on), its backwards [10,14], [14,18], [18,22] (2 + 2 of
    # sending), the gradients arriving at 14, 18, 22; rank 0's backwards [14,16], [18,20],
    # [22,24] send nothing. Each rank is busy 9 computing plus 3 * 2 sending.
    for contention in (False, True):  # a rank that waits for its sends never queues them
        costs = Costs(
            F=1, B=2, comm_bytes=4, bandwidth=2, contention=contention, overlap_send=False
        )
        timeline = simulate(gpipe(2, 3), costs)
        assert rows(timeline.starts) == [[0, 3, 6, 14, 18, 22], [3, 6, 9, 10, 14, 18]]
        assert rows(timeline.ends) == [[3, 6, 9, 16, 20, 24], [4, 7, 10, 14, 18, 22]]
        assert timeline.busy(0) == timeline.busy(1) == 9 + 3 * 2
        assert timeline.makespan == 24


def test_contention_costs_interleaving_its_extra_messages_on_a_slow_link():
    # p = 2, v = 2, m = 2, a device's F = 2 and B = 4 (chunk passes 1 and 2), 4 per message.
    # Rank 0 runs 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1, rank 1 runs 1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1.
    # With contention, each pair of messages sent back to back queues:
    #   0F0 [0,1] leaves 5; 0F1 [1,2] leaves 9 | 1F0 [5,6] leaves 10; 1F1 [9,10] leaves 14
    #   2F0 [10,11] leaves 15; 2F1 [14,15] 19  | 3F0 [15,16], 3B0 [16,18] leaves 22;
    #   3F1 [19,20], 3B1 [20,22] leaves 26     | 2B0 [22,24] leaves 28; 2B1 [26,28] 32
    #   1B0 [28,30] leaves 34; 1B1 [32,34] 38  | 0B0 [34,36]; 0B1 [38,40]: makespan 40.
    # Without contention the second of each pair leaves 4 after its own end: 0B1 ends 39.
    # 1F1B on the same link sends half as many messages; they never wait: 26 both ways.
    slow = {"F": 2, "B": 4, "comm_bytes": 4, "bandwidth": 1}
    queued = simulate(interleaved_1f1b(2, 2, 2), Costs(**slow, contention=True))
    assert list(queued.starts[0]) == [0, 1, 10, 14, 22, 26, 34, 38]
    assert list(queued.starts[1]) == [5, 9, 15, 16, 19, 20, 28, 32]
    assert queued.makespan == 40
    assert simulate(interleaved_1f1b(2, 2, 2), Costs(**slow)).makespan == 39
    for contention in (False, True):
        assert simulate(one_f_one_b(2, 2), Costs(**slow, contention=contention)).makespan == 26


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("latency, nbytes", [(0.5, 0), (1, 2), (0, 3)])
def test_1f1b_steady_state_pays_a_round_trip_every_p_microbatches(p, latency, nbytes):
    # In 1F1B's steady state rank 0 runs F(j+p) right after B(j), and B(j) comes back
    # only when micro-batch j has made the round trip: p forwards and p backwards, one on
    # each rank, with 2(p-1) transfers of c = latency + bytes/bandwidth between them. So p
    # more micro-batches add p(F+B) + 2(p-1)c: per micro-batch F + B + 2(p-1)c/p. GPipe's
    # steady state sends without waiting for replies and adds p(F+B) only; with contention
    # its forwards queue on the link and each micro-batch takes max(F, s) + max(B, s).
    f, b, c, s = 1, 2, latency + nbytes, nbytes
    for contention in (False, True):
        costs = Costs(F=f, B=b, comm=latency, comm_bytes=nbytes, bandwidth=1, contention=contention)
        for m in (p, 2 * p):
            added = simulate(one_f_one_b(p, m + p), costs).makespan
            added -= simulate(one_f_one_b(p, m), costs).makespan
            assert added == pytest.approx(p * (f + b) + 2 * (p - 1) * c)
            added = (
                simulate(gpipe(p, m + p), costs).makespan - simulate(gpipe(p, m), costs).makespan
            )
            each = max(f, s) + max(b, s) if contention else f + b
            assert added == pytest.approx(p * each)


def test_two_nodes_of_8_only_rank_7_to_8_pays_the_slow_link():
    # GPipe, p = 16, m = 1, F = 1, B = 2: one micro-batch goes down and back through 15
    # boundaries each way: 14 fast ones (1) and the one between nodes (10): 16 * 3 + 2 * 24.
    nodes = Topology(Link(latency=1), Link(latency=10), devices_per_node=8)
    assert [nodes.link(r, r + 1).latency for r in range(15)] == [1] * 7 + [10] + [1] * 7
    assert nodes.link(8, 7) is nodes.inter_node and nodes.link(0, 7) is nodes.intra_node
    timeline = simulate(gpipe(16, 1), Costs(F=1, B=2, topology=nodes))
    assert timeline.makespan == 16 * 3 + 2 * (14 * 1 + 10)
    forward_waits = [timeline.starts[r + 1][0] - timeline.ends[r][0] for r in range(15)]
    assert forward_waits == [1] * 7 + [10] + [1] * 7
    # Ranks alternating between the nodes: every boundary pays the slow link.
    spread = Topology(
        Link(latency=1),
        Link(latency=10),
        devices_per_node=8,
        placement=[(r % 2) * 8 + r // 2 for r in range(16)],
    )
    assert simulate(gpipe(16, 1), Costs(F=1, B=2, topology=spread)).makespan == 48 + 2 * 150


def test_message_size_and_nominal_links():
    assert boundary_bytes(1, 2048, 4096, 2) == 2**24  # b s h in bf16: 16 MiB
    links = nominal_links()
    assert {"NVLink 3", "NVLink 4", "NVLink 5", "PCIe 4.0 x16", "PCIe 5.0 x16"} <= set(links)
    assert {"InfiniBand HDR", "InfiniBand NDR", "Ethernet 100G", "Ethernet 400G"} <= set(links)
    assert links["NVLink 4"] == 450 and links["InfiniBand NDR"] == 400 / 8
    # 450 GB/s in milliseconds: 4.5e8 bytes per ms; 2 us of latency is 0.002 ms.
    nvlink = Link.from_gb_per_s(450, 2, time_unit_s=1e-3)
    assert nvlink.bandwidth == pytest.approx(4.5e8) and nvlink.latency == pytest.approx(0.002)
    assert nvlink.time(2**24) == pytest.approx(0.002 + 2**24 / 4.5e8)


def test_links_csv_states_both_directions_and_a_source_for_each_link():
    import csv

    with LINKS_CSV.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        each, both = float(row["GB_per_s_each_direction"]), float(row["GB_per_s_both_directions"])
        assert both == 2 * each, row["link"]
        assert row["source"].startswith("https://"), row["link"]
        assert row["kind"] in ("intra-node", "inter-node")


def test_a_rails_node_has_one_ndr_nic_per_gpu():
    # The 8-GPU node's rails are eight NDR ports of 400 Gb/s: eight times one port, and the
    # figure collective_gbps charges a ring with all eight GPUs of a node in it.
    from ppbook.links import RAIL_NICS_PER_NODE, collective_gbps, nominal_links

    links = nominal_links()
    rails = links["InfiniBand NDR rails (8-GPU node)"]
    assert RAIL_NICS_PER_NODE == 8
    assert rails == RAIL_NICS_PER_NODE * links["InfiniBand NDR"] == 400 * 8 / 8
    assert collective_gbps(16, 8, 10_000, links["InfiniBand NDR"]) == rails
