"""Several training steps in a row, rank spans, the period and the Zero Bubble paper's rate.

Independent answers: the tick-by-tick brute-force simulator of test_simulate run on the
repeated schedule, and closed forms worked out by hand from each schedule's structure.
"""

import pytest
from test_simulate import brute_force

from ppbook import limits
from ppbook.cli import main
from ppbook.costs import Costs
from ppbook.schedule import Action, Schedule
from ppbook.schedules import SCHEDULES, build, dualpipe, gpipe, one_f_one_b, zb_h1, zb_h2
from ppbook.simulate import simulate

EVEN = Costs(F=1, I=1, W=1)


@pytest.mark.parametrize("builder", [gpipe, one_f_one_b])
@pytest.mark.parametrize("p, m, f, b, comm", [(2, 3, 1, 2, 0), (3, 5, 2, 3, 1), (4, 4, 1, 1, 2)])
def test_steps_without_sync_equal_brute_force_on_the_repeated_order(builder, p, m, f, b, comm):
    schedule = builder(p, m)
    timeline = simulate(schedule, Costs(F=f, B=b, comm=comm), steps=3, sync="none")
    reference = brute_force(schedule.repeated(3), f, b, comm)
    for rank, row in enumerate(timeline.schedule.actions):
        for k, action in enumerate(row):
            assert (timeline.starts[rank][k], timeline.ends[rank][k]) == reference[action]


@pytest.mark.parametrize("builder", [one_f_one_b, zb_h2])
def test_with_the_optimizer_sync_each_step_starts_when_the_last_rank_has_finished(builder):
    p, m, steps = 4, 8, 3
    one = brute_force(one_f_one_b(p, m), 1, 2, 0) if builder is one_f_one_b else None
    timeline = simulate(builder(p, m), EVEN, steps=steps, sync="optimizer")
    step_ends = []
    for k in range(steps):
        spans = timeline.step_spans(k)
        step_ends.append(max(end for _, end in spans))
        if k:  # nothing of step k starts before all of step k-1 has ended
            assert min(start for start, _ in spans) == step_ends[k - 1]
    assert step_ends[1] - step_ends[0] == timeline.period == step_ends[2] - step_ends[1]
    if one is not None:  # 1F1B under F = 1, B = 2 (= I + W): (m + p - 1) * 3 per step
        assert timeline.period == max(end for _, end in one.values()) == (m + p - 1) * 3


@pytest.mark.parametrize("p, m", [(2, 3), (3, 5), (4, 8), (5, 12), (8, 16)])
def test_zb_h2_reaches_zero_bubble_in_the_steady_state_only_without_sync(p, m):
    # F = I = W = 1: one step is m(F+I+W) + (p-1)F (the parallelogram's two triangles);
    # post-validated, the next step fills them and a step takes exactly m(F+I+W).
    free = simulate(zb_h2(p, m), EVEN, steps=4, sync="none")
    synced = simulate(zb_h2(p, m), EVEN, steps=4, sync="optimizer")
    assert free.period == 3 * m
    assert free.period_bubble_fraction == 0
    assert synced.period == 3 * m + (p - 1)
    assert synced.period_bubble_fraction == pytest.approx((p - 1) / (3 * m + p - 1))
    assert free.rank_spans == [3 * m] * p and free.zb_bubble_rate == 0
    # the overlap itself: rank 0 starts step 1 before the last rank has ended step 0
    assert free.step_spans(1)[0][0] < free.step_spans(0)[p - 1][1]


@pytest.mark.parametrize("p, m", [(2, 2), (4, 8), (3, 7)])
def test_1f1b_spans_shrink_down_the_pipeline_and_its_rate_is_f(p, m):
    # F = 1, B = 2: rank r's first forward starts at r*F and its last backward ends r*B
    # before the makespan (m + p - 1)(F + B), so its span is (m + p - 1 - r)(F + B).
    timeline = simulate(one_f_one_b(p, m), Costs(F=1, B=2))
    assert timeline.rank_spans == [3.0 * (m + p - 1 - r) for r in range(p)]
    assert timeline.zb_bubble_rate == pytest.approx((p - 1) / (m + p - 1))
    assert timeline.zb_bubble_rate == pytest.approx(timeline.bubble_fraction)


def test_zb_h1_rate_is_over_the_first_ranks_span():
    # Table 2 of the Zero Bubble paper (its B is our I), m >= p, W <= F, W <= I:
    # rank 0 spans the whole step, m(F+I+W) + (p-1)(F+I-W).
    p, m, f, i, w = 4, 8, 2.0, 3.0, 1.0
    timeline = simulate(zb_h1(p, m), Costs(F=f, I=i, W=w))
    longest = m * (f + i + w) + (p - 1) * (f + i - w)
    assert max(timeline.rank_spans) == timeline.rank_spans[0] == longest
    assert timeline.zb_bubble_rate == pytest.approx(1 - m * (f + i + w) / longest)


def test_dualpipe_pairs_repeat_with_their_routes():
    schedule = dualpipe(4, 8)
    repeated = schedule.repeated(2)
    assert repeated.num_microbatches == 16
    assert repeated.routes[8:] == schedule.routes
    pair = next(s for s in repeated.actions[0][len(schedule.actions[0]) :] if len(s.parts) == 2)
    assert all(part.microbatch >= 8 for part in pair.parts)
    for sync in ("optimizer", "none"):
        timeline = simulate(schedule, Costs(F=1, B=2), steps=2, sync=sync)
        assert timeline.period <= simulate(schedule, Costs(F=1, B=2)).makespan


def test_metrics_report_m_per_step_and_the_new_measures():
    metrics = simulate(zb_h2(4, 8), EVEN, steps=4, sync="none").metrics()
    assert metrics["num_microbatches"] == 8 and metrics["steps"] == 4
    assert metrics["sync"] == "none" and metrics["period"] == 24
    assert metrics["rank_spans"] == [24.0] * 4 and metrics["zb_bubble_rate"] == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"steps": 0}, "steps >= 1"),
        ({"steps": 1.5}, "steps"),
        ({"steps": True}, "steps"),
        ({"sync": "post"}, "sync must be one of 'optimizer', 'none', got 'post'"),
    ],
)
def test_bad_steps_and_sync_are_one_line_errors(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        simulate(one_f_one_b(2, 2), **kwargs)
    assert "\n" not in str(info.value)


def test_steps_beyond_the_limits_are_refused_before_building():
    with limits.use(actions=1000), pytest.raises(ValueError, match="100 steps .* beyond"):
        simulate(one_f_one_b(2, 4), steps=100)


def test_step_spans_name_the_steps_there_are():
    timeline = simulate(one_f_one_b(2, 2), steps=2, sync="none")
    assert timeline.step_spans(-2) == timeline.step_spans(0)
    with pytest.raises(ValueError, match="from -2 to 1, got 2"):
        timeline.step_spans(2)


def test_command_line_steps_and_sync(capsys):
    import json

    base = ["simulate", "--schedule", "zb-h2", "--stages", "4", "--microbatches", "8"]
    base += ["--costs", "F=1,I=1,W=1", "--steps", "4", "--json"]
    assert main([*base, "--sync", "none"]) == 0
    assert json.loads(capsys.readouterr().out)["period"] == 24
    assert main([*base, "--sync", "optimizer"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["period"] == 27 and out["zb_bubble_rate"] == 0
    assert main([*base[:-1], "--sync", "none"]) == 0
    text = capsys.readouterr().out
    assert "period (steady-state step time)  24 time units" in text
    assert "Zero Bubble paper's bubble rate  0.0000" in text
    assert main([*base[:-3], "--steps", "0"]) == 2
    assert "--steps must be >= 1, got 0" in capsys.readouterr().err


def test_a_step_is_the_micro_batches_of_that_step():
    timeline = simulate(one_f_one_b(2, 3), steps=2, sync="none")
    second = timeline.schedule.actions[0][len(one_f_one_b(2, 3).actions[0])]
    assert second == Action(0, "F", 3)


def test_w_memory_frees_all_but_its_share_at_the_input_gradient():
    # ZB-H2, p = 4, F = I = W = 1: rank r warms up with 2(p-1-r) forwards and runs each W
    # 2r micro-batches after its I. At its peak it holds 2(p-1-r) + 1 micro-batches whole
    # (the warm-up and the one in flight) and 2r whose I is done and whose W waits, each
    # holding the share w: 2(p-1-r) + 1 + 2r w.
    p = 4
    for w in (1.0, 0.5, 0.25, 0.0):
        timeline = simulate(zb_h2(p, 8), Costs(F=1, I=1, W=1, w_memory=w, activation_bytes=8))
        for r in range(p):
            expected = 2 * (p - 1 - r) + 1 + 2 * r * w
            assert timeline.peak_activations(r) == pytest.approx(expected)
            assert timeline.peak_activation_bytes(r) == pytest.approx(8 * expected)


@pytest.mark.parametrize("w", [-0.5, 1.5, "half"])
def test_w_memory_outside_zero_to_one_is_refused(w):
    with pytest.raises(ValueError, match="w_memory"):
        Costs(w_memory=w)


def test_costs_name_the_time_unit_the_timeline_carries():
    seconds = Costs(F=0.5, B=1.0, time_unit="s")
    for steps, sync in ((1, "optimizer"), (3, "optimizer"), (3, "none")):
        timeline = simulate(one_f_one_b(2, 4), seconds, steps=steps, sync=sync)
        assert timeline.time_unit == "s"
    assert simulate(one_f_one_b(2, 4)).time_unit == "time unit"
    with pytest.raises(ValueError, match="time_unit to name the unit"):
        Costs(time_unit="")


def test_a_peak_of_waiting_shares_is_counted_exactly():
    # One rank: ten micro-batches run F and I, each leaving w = 0.1 of its activations for
    # its W, then an eleventh F: 1 + 10 * 0.1 = 2 exactly (a running float sum reads
    # 2.000000000000001, over a memory limit of 2).
    row = [f"0{kind}{j}" for j in range(11) for kind in "FI"] + [f"0W{j}" for j in range(11)]
    timeline = simulate(Schedule.from_strings([row]), Costs(F=1, I=1, W=1, w_memory=0.1))
    assert timeline.peak_activations(0) == 2.0
    assert max(amount for _, amount in timeline.memory(0)) == 2.0


REFUSED = {"dualpipe": {3: "even num_stages"}}
"""The p of the grid below that a schedule refuses, with a word of its reason: DualPipe
feeds half of the micro-batches from each end, so it needs an even p."""


@pytest.mark.parametrize("name", [n for n in SCHEDULES if n != "zb-auto"] + ["zb-auto"])
def test_post_validated_period_is_the_longest_one_step_span(name):
    # With free transfers, steps that overlap settle to a period equal to the longest span
    # one rank has in a single step: why the Zero Bubble paper measures its bubble rate on
    # that span. Four simulated steps against one, on a grid of p, m and costs.
    refused, compared = {}, 0
    for p, m in ((2, 4), (3, 6), (4, 8)):
        for f, i, w in ((1, 1, 1), (2, 1, 0.5), (0.5, 2, 1), (1, 2, 2)):
            costs = Costs(F=f, I=i, W=w)
            try:
                schedule = (
                    build(name, p, m, costs=costs) if name == "zb-auto" else build(name, p, m)
                )
            except ValueError as exc:  # a p this schedule does not take: counted below
                refused.setdefault(p, set()).add(str(exc))
                continue
            steady = simulate(schedule, costs, steps=4, sync="none")
            assert steady.period == pytest.approx(max(simulate(schedule, costs).rank_spans))
            compared += 1
    expected = REFUSED.get(name, {})
    assert sorted(refused) == sorted(expected)  # exactly the p stated, for every cost
    for p, reasons in refused.items():
        assert len(reasons) == 1 and expected[p] in next(iter(reasons)), reasons
    assert compared == 4 * (3 - len(expected))
