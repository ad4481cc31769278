"""The simulator against closed forms and against an independent brute-force simulator."""

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schedule_strategies import valid_schedules
from timeline_checks import assert_bubble_from_gaps

from ppbook.costs import Costs
from ppbook.schedule import Action, Schedule
from ppbook.schedules import build, gpipe, interleaved_1f1b, looped_bfs, one_f_one_b
from ppbook.simulate import simulate
from ppbook.validate import ScheduleError, validate

small = st.integers(min_value=1, max_value=7)
cost = st.integers(min_value=1, max_value=5)


def brute_force(schedule: Schedule, f: int, b: int, comm: int, i: int = 0, w: int = 0):
    """Tick-by-tick reference: at each integer time, every idle rank starts its next action
    if everything it needs has arrived. A pass takes f, b, i or w ticks (F, B, I, W), a
    transfer between ranks comm. For schedules whose micro-batches go through every stage
    in order; written without ppbook.validate, ppbook.dependencies or ppbook.simulate.
    Returns {action: (start, end)}, or None if no rank can move and some are unfinished."""
    duration = {"F": f, "B": b, "I": i, "W": w}
    present = {action for row in schedule.actions for action in row}
    done: dict[Action, int] = {}
    timing = {}
    position = [0] * schedule.num_ranks
    busy_until = [0] * schedule.num_ranks
    last = schedule.num_stages - 1
    t = 0
    while any(position[r] < len(row) for r, row in enumerate(schedule.actions)):
        before = list(position)
        for rank, row in enumerate(schedule.actions):
            if position[rank] == len(row) or busy_until[rank] > t:
                continue
            stage, kind, mb = action = row[position[rank]]
            needs = []
            if kind == "F" and stage > 0:
                needs = [Action(stage - 1, "F", mb)]
            elif kind in ("B", "I"):
                after = Action(stage + 1, "B", mb)
                after = after if after in present else Action(stage + 1, "I", mb)
                needs = [Action(stage, "F", mb)] + ([after] if stage < last else [])
            elif kind == "W":
                needs = [Action(stage, "I", mb)]
            ready = True
            for need in needs:
                hop = comm if schedule.stage_to_rank[need.stage] != rank else 0
                if need not in done or done[need] + hop > t:
                    ready = False
            if ready:
                end = t + duration[kind]
                timing[action] = (t, end)
                done[action] = end
                busy_until[rank] = end
                position[rank] += 1
        if position == before and t >= max(busy_until) + comm:
            return None  # nothing started, all is done and delivered: nothing ever will
        t += 1
    return timing


def chunk_costs(schedule: Schedule, **passes) -> dict:
    """Costs of one device's share that make each chunk pass take ``passes[kind]``."""
    scale = len(schedule.route(0)) / len(set(schedule.stage_to_rank))  # 1 / chunk_share
    return {kind: value * scale for kind, value in passes.items()}


def assert_times(timeline, reference) -> None:
    """Every interval of ``timeline`` as ``reference`` has it (chunk costs are scaled)."""
    assert reference is not None, "the reference found the schedule stuck"
    assert sum(map(len, timeline.intervals)) == len(reference)
    for row in timeline.intervals:
        for interval in row:
            start, end = reference[interval.action]
            assert interval.start == pytest.approx(start, abs=1e-9), interval.action
            assert interval.end == pytest.approx(end, abs=1e-9), interval.action


@settings(max_examples=60, deadline=None)
@given(schedule=valid_schedules(), f=cost, b=cost, i=cost, w=cost, comm=st.integers(0, 3))
def test_simulator_equals_brute_force_on_random_valid_schedules(schedule, f, b, i, w, comm):
    """Every example is a valid schedule that finishes (schedule_strategies builds it so):
    the simulator's times are the reference's, for F and B, split I and W, and chunks."""
    costs = Costs(**chunk_costs(schedule, F=f, B=b, I=i, W=w), comm=comm)
    assert_times(simulate(schedule, costs), brute_force(schedule, f, b, comm, i, w))


def random_order(rng: random.Random, p: int, m: int) -> Schedule:
    """A random per-rank interleaving of each stage's forwards and backwards: valid, but
    it deadlocks more often than not."""
    rows = []
    for stage in range(p):
        forwards = [Action(stage, "F", j) for j in range(m)]
        backwards = [Action(stage, "B", j) for j in range(m)]
        rng.shuffle(forwards)
        rng.shuffle(backwards)
        row = []
        while forwards or backwards:
            source = forwards if forwards and (not backwards or rng.random() < 0.5) else backwards
            row.append(source.pop())
        rows.append(row)
    return Schedule(rows, tuple(range(p)), m)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), p=st.integers(2, 4), m=st.integers(2, 4), comm=st.integers(0, 3))
def test_the_simulator_finds_a_deadlock_exactly_when_the_reference_is_stuck(seed, p, m, comm):
    schedule = random_order(random.Random(seed), p, m)
    reference = brute_force(schedule, 1, 2, comm)
    if reference is None:
        with pytest.raises(ScheduleError, match="cannot finish"):
            simulate(schedule, Costs(F=1, B=2, comm=comm))
    else:
        assert_times(simulate(schedule, Costs(F=1, B=2, comm=comm)), reference)


def test_every_drawn_schedule_is_valid_and_the_draws_cover_the_grid():
    """Counted, not hoped for: each of 150 examples (derandomized under CI=true) validates
    and finishes, and together they cover p in 1..5, m in 1..6, v in 1..3, the V placement
    and all three kinds of split backward."""
    seen = []

    @settings(max_examples=150, deadline=None, database=None)
    @given(valid_schedules())
    def draw(schedule):
        validate(schedule)
        simulate(schedule)  # a deadlock would raise ScheduleError
        seen.append(schedule.name.split()[1:])

    draw()
    assert len(seen) == 150
    p, m, v, shape, split = (set(column) for column in zip(*seen, strict=True))
    assert p == {f"p={k}" for k in range(1, 6)} and m == {f"m={k}" for k in range(1, 7)}
    assert v == {"v=1", "v=2", "v=3"} and shape == {"loop", "v"}
    assert split == {"split=none", "split=all", "split=mixed"}


@settings(max_examples=40, deadline=None)
@given(p=small, m=st.integers(1, 20), f=cost, b=cost, comm=st.integers(0, 3))
def test_gpipe_and_1f1b_makespan_closed_form(p, m, f, b, comm):
    for schedule in (gpipe(p, m), one_f_one_b(p, m)):
        timeline = simulate(schedule, Costs(F=f, B=b))
        assert timeline.makespan == (m + p - 1) * (f + b)
        assert timeline.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
        assert timeline.bubble_ratio == pytest.approx((p - 1) / m)
    # With a transfer cost c on every hop, GPipe's makespan grows by exactly 2(p-1)c.
    timeline = simulate(gpipe(p, m), Costs(F=f, B=b, comm=comm))
    assert timeline.makespan == (m + p - 1) * (f + b) + 2 * (p - 1) * comm


@settings(max_examples=40, deadline=None)
@given(p=small, m=st.integers(1, 20))
def test_peak_activations_gpipe_m_and_1f1b_min_p_m(p, m):
    assert simulate(gpipe(p, m)).peak_activations(0) == m
    timeline = simulate(one_f_one_b(p, m))
    assert timeline.peak_activations(0) == min(p, m)
    assert [timeline.peak_activations(r) for r in range(p)] == [min(p - r, m) for r in range(p)]


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 6), groups=st.integers(1, 4), v=st.integers(1, 4), f=cost, b=cost)
def test_interleaved_makespan_closed_form(p, groups, v, f, b):
    m = groups * p
    # Costs are a device's share; each chunk pass takes F/v and B/v (chunk_share = 1/v),
    # so the makespan is Megatron-LM's m(F+B) + (p-1)(F+B)/v.
    timeline = simulate(interleaved_1f1b(p, m, v), Costs(F=f, B=b))
    assert timeline.makespan == pytest.approx(m * (f + b) + (p - 1) * (f + b) / v)
    assert timeline.bubble_ratio == pytest.approx((p - 1) / (v * m))


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "interleaved-1f1b", "looped-bfs"])
@pytest.mark.parametrize("p, m", [(1, 1), (2, 2), (3, 6), (4, 8), (4, 12)])
def test_generic_lower_bounds(name, p, m):
    schedule = build(name, p, m)
    costs = Costs(F=[1 + s % 3 for s in range(schedule.num_stages)], B=2.5, comm=0.3)
    timeline = simulate(schedule, costs)
    busiest = max(timeline.busy(r) for r in range(p))
    assert timeline.makespan >= busiest - 1e-9
    per_stage = costs.per_stage(schedule.num_stages, share=schedule.chunk_share)
    hops = sum(
        schedule.stage_to_rank[s] != schedule.stage_to_rank[s + 1]
        for s in range(schedule.num_stages - 1)
    )
    one_microbatch = sum(per_stage["F"]) + sum(per_stage["B"]) + 2 * hops * costs.transfer
    assert timeline.makespan >= one_microbatch - 1e-9


@settings(max_examples=30, deadline=None)
@given(p=small, extra=st.integers(0, 6), v=st.integers(1, 3), f=cost, b=cost)
def test_looped_bfs_bubble_is_the_closed_form_in_both_conventions(p, extra, v, f, b):
    # Breadth-first with m >= p micro-batches, free transfers: each rank runs its m v chunk
    # passes back to back after the fill of p - 1 chunk steps in each direction, so the
    # makespan is (m + (p-1)/v)(F+B): f = (p-1)/(mv+p-1) and r = (p-1)/(mv).
    m = p + extra
    timeline = simulate(looped_bfs(p, m, v), Costs(F=f, B=b))
    assert timeline.makespan == pytest.approx((m + (p - 1) / v) * (f + b))
    assert timeline.bubble_fraction == pytest.approx((p - 1) / (m * v + p - 1))
    assert timeline.bubble_ratio == pytest.approx((p - 1) / (m * v))


@settings(max_examples=30, deadline=None)
@given(p=st.integers(2, 7), m=st.integers(1, 12), v=st.integers(1, 3))
def test_both_conventions_are_the_idle_time_summed_gap_by_gap(p, m, v):
    timeline = simulate(looped_bfs(p, m, v), Costs(F=1, B=3, comm=0.5))
    assert_bubble_from_gaps(timeline)
    for rank in range(p):
        gaps = timeline.idle_gaps(rank)
        assert sum(e - s for s, e in gaps) == pytest.approx(timeline.idle(rank))


def test_memory_curve_and_bytes():
    timeline = simulate(one_f_one_b(3, 5), Costs(F=1, B=2, activation_bytes=[10, 20, 30]))
    curve = timeline.memory(0)
    assert curve[0] == (0.0, 0.0) and curve[-1][1] == 0
    assert max(a for _, a in curve) == 3
    assert timeline.peak_activation_bytes(1) == 2 * 20
    metrics = timeline.metrics()
    assert metrics["peak_activations_full_stage"] == [3, 2, 1]
    assert metrics["peak_activation_bytes"] == [30, 40, 30]
    with pytest.raises(ValueError, match="needs activation_bytes"):
        simulate(one_f_one_b(2, 2)).memory(0, in_bytes=True)


def test_split_backward_frees_activation_at_w():
    rows = [["0F0", "0F1", "0I0", "0I1", "0W0", "0W1"], ["1F0", "1I0", "1F1", "1I1", "1W0", "1W1"]]
    timeline = simulate(Schedule.from_strings(rows), Costs(F=1, I=1, W=1))
    # Rank 1 holds both activations until its W passes, although its I passes are done.
    assert timeline.peak_activations(1) == 2


def test_costs_per_stage_lists_and_overlap_pair():
    rows = [["0F0", "(0F1;0B0)OVERLAP_F_B", "0B1"]]
    schedule = Schedule.from_strings(rows)
    assert simulate(schedule, Costs(F=1, B=2)).makespan == 1 + 3 + 2
    assert simulate(schedule, Costs(F=1, B=2, FB=2.5)).makespan == 1 + 2.5 + 2


def test_deadlock_names_each_stuck_rank_and_what_it_waits_for():
    rows = [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]
    schedule = Schedule.from_strings(rows)
    with pytest.raises(ScheduleError) as excinfo:
        simulate(schedule)
    message = str(excinfo.value)
    assert "rank 0 is stuck at position 1 on 0B0, which waits for 1B0 on rank 1" in message
    assert "rank 1 is stuck at position 0 on 1F1, which waits for 0F1 on rank 0" in message


def test_large_deadlock_is_found_at_once_without_recursion():
    p, m = 64, 256
    rows = [
        [Action(s, "F", j) for j in range(m)] + [Action(s, "B", j) for j in range(m)]
        for s in range(p)
    ]
    rows[p - 1] = rows[p - 1][::-1]  # last stage runs backwards before forwards
    schedule = Schedule(rows, tuple(range(p)), m)
    began = time.perf_counter()
    with pytest.raises(ScheduleError, match="rank 63 is stuck at position 0 on 63B255"):
        simulate(schedule)
    assert time.perf_counter() - began < 30  # generous: a hang or recursion would not finish


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"F": -1}, "Costs needs F to be a finite number >= 0, got -1"),
        ({"F": [1, 2]}, "cost F has 2 values, but the schedule has 3 stages"),
        ({"I": 1}, "give both I and W"),
        ({"B": 2, "I": 3}, "cost W would be negative"),
        ({"comm_bytes": 10}, "comm_bytes needs a bandwidth"),
        ({"bandwidth": 0}, r"bandwidth \(bytes per time unit\) to be a finite number > 0"),
    ],
)
def test_bad_costs_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulate(one_f_one_b(3, 3), Costs(**kwargs))


def test_cost_defaults_follow_pytorch_kinds():
    assert Costs(F=1, B=4).per_stage(1) == {"F": [1], "B": [4], "I": [2], "W": [2], "FB": None}
    assert Costs(F=1, I=1, W=3).per_stage(1)["B"] == [4]
    assert Costs(F=2).per_stage(1)["B"] == [4]
    assert Costs(comm=0.5, comm_bytes=100, bandwidth=50).transfer == 2.5
    assert Costs.parse("F=1, B=2,W=0.5", comm=0.1) == Costs(F=1, B=2, W=0.5, comm=0.1)
    with pytest.raises(ValueError, match="cannot read cost 'X=1'"):
        Costs.parse("X=1")
    with pytest.raises(ValueError, match="cost B must be a number, got 'two'"):
        Costs.parse("B=two")


def test_a_rank_that_holds_no_stage_is_refused():
    # A pipeline of two ranks whose second rank runs nothing is not a pipeline of two.
    schedule = Schedule([[Action(0, "F", 0), Action(0, "B", 0)], []], (0,), 1)
    with pytest.raises(ScheduleError, match="rank 1 holds no stage and runs nothing"):
        simulate(schedule)


def test_zero_costs_keep_the_peak_in_execution_order():
    # Every action takes no time: memory still follows each rank's order of actions.
    timeline = simulate(one_f_one_b(4, 8), Costs(F=0, B=0))
    assert [timeline.peak_activations(r) for r in range(4)] == [4, 3, 2, 1]
    assert simulate(gpipe(3, 5), Costs(F=0, B=0)).peak_activations(0) == 5


@pytest.mark.parametrize("value", [None, "1", [1, "2", 3], True])
def test_costs_that_are_not_numbers_are_clear_errors(value):
    with pytest.raises(ValueError, match=r"Costs needs F(\[1\])? to be a"):
        Costs(F=value)


@pytest.mark.parametrize("schedule", [None, "1f1b", [[Action(0, "F", 0)]]])
def test_simulating_what_is_not_a_schedule_is_a_clear_error(schedule):
    with pytest.raises(ValueError, match="expected a ppbook.schedule.Schedule, got"):
        simulate(schedule)


def test_costs_that_are_not_costs_are_a_clear_error():
    with pytest.raises(ValueError, match="costs must be a ppbook.costs.Costs, got dict"):
        simulate(gpipe(2, 2), {"F": 1})


def test_the_simulator_takes_its_rules_from_ppbook_dependencies(monkeypatch):
    """Change the one rule and the simulator follows: with no dependencies at all, GPipe
    (p = 2, m = 1) takes only its busiest rank's F + B, not the (m+p-1)(F+B) of the rule."""
    import ppbook.validate

    assert simulate(gpipe(2, 1)).makespan == 6
    monkeypatch.setattr(ppbook.validate, "needs", lambda *args: ())
    assert simulate(gpipe(2, 1)).makespan == 3


def test_interleaved_chunk_passes_take_a_share_of_the_cost():
    # p = 2, m = 2, v = 2 with a device's F = 1, B = 2: each chunk pass takes 0.5 and 1,
    # and the makespan is Megatron-LM's m(F+B) + (p-1)(F+B)/v = 6 + 1.5.
    timeline = simulate(interleaved_1f1b(2, 2, 2), Costs(F=1, B=2))
    assert timeline.makespan == 7.5
    durations = {e - s for s, e in zip(timeline.starts[0], timeline.ends[0], strict=True)}
    assert durations == {0.5, 1.0}
