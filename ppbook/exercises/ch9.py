"""Exercises of chapter 9, the pipeline on GPUs (``notebooks/09_multi_gpu.ipynb``).

The right answers come from the package at check time: the mode a machine gets
(:func:`ppbook.runtime.devices.mode_for`), the messages a schedule sends
(:func:`ppbook.runtime.plan.sent_by`), the simulator (:func:`ppbook.simulate.simulate`,
under costs measured on CPU processes: ``data/bench_runtime_cpu.txt``, F about 10 ms,
B about 20 ms, a transfer about 0.5 ms), the run configuration's own check
(:func:`ppbook.runtime.config.check`), and the clock offset of one round trip as
:func:`ppbook.runtime.clock.clock_offsets` computes it. The hints name the usual slips:
NCCL with two ranks on one GPU, a GPU-less torch, the runtime's round-robin map,
GPipe's formula for 1F1B, the bubble formula without transfers, a run that cannot be
compared, and the offset read off the send or the return alone. Exercises 9.7 and 9.8
(implement, derive) live in :mod:`ppbook.exercises.ch9_derive`.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

import ppbook.exercises.ch9_derive  # noqa: F401 (registers 9.7 and 9.8: implement, derive)
from ppbook.checks import shown
from ppbook.costs import Costs
from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.exercises.ch9_derive import crossing_messages
from ppbook.runtime.config import RunConfig, check
from ppbook.runtime.devices import MODES, mode_for
from ppbook.schedules import gpipe, one_f_one_b
from ppbook.simulate import simulate

# ----- 9.1 the mode of a machine ----------------------------------------------------------------

MACHINES = (
    ("3 ranks on a node with 2 GPUs and NCCL", 2, True, 3),
    ("2 ranks on a node with 4 GPUs and NCCL", 4, True, 2),
    ("2 ranks under a torch built without CUDA", 0, False, 2),
)
"""(description, GPUs, NCCL, ranks) of the machines of exercise 9.1."""


@exercise(
    "9.1",
    "Choose the mode (nccl, shared-gpu or cpu) of 3 ranks on 2 GPUs with NCCL, of 2 ranks "
    "on 4 GPUs with NCCL, and of 2 ranks under a torch built without CUDA.",
    kind="choose",
    solution="3 ranks on 2 GPUs: ranks 0 and 2 share GPU 0 (rank r on GPU r mod 2), and NCCL "
    "cannot put two ranks of one communicator on one device, so all ranks talk gloo through "
    "host memory (`shared-gpu`). 2 ranks on 4 GPUs: each rank has its own GPU, messages go "
    "GPU to GPU (`nccl`; two GPUs stay idle). A torch without CUDA sees no GPU: CPU "
    "processes over gloo (`cpu`). `[mode_for(2, nproc=3).name, mode_for(4, nproc=2).name, "
    'mode_for(0, False, nproc=2).name]` gives `["shared-gpu", "nccl", "cpu"]`.',
    answer_name="answer_1",
)
def _modes(answer):
    if not isinstance(answer, list | tuple) or len(answer) != len(MACHINES):
        return wrong(
            f"this exercise wants a list of {len(MACHINES)} modes such as "
            f'["cpu", "cpu", "cpu"], got {shown(answer)}.'
        )
    given = [str(a).strip().lower() for a in answer]
    for text in given:
        if text not in MODES:
            return wrong(f"{text!r} is not a mode; the modes are {', '.join(MODES)}.")
    truth = [mode_for(gpus, nccl, ranks).name for _, gpus, nccl, ranks in MACHINES]
    if given == truth:
        return right(
            "more ranks than GPUs: shared; a GPU for every rank: NCCL; no CUDA: CPU processes."
        )
    machine, gpus, ranks, mine = next(
        (machine, gpus, ranks, mine)
        for (machine, gpus, _, ranks), mine, theirs in zip(MACHINES, given, truth, strict=True)
        if mine != theirs
    )
    if gpus == 0:
        return wrong(f"{machine}: torch sees no GPU at all.", "what is left without one?")
    if ranks > gpus and mine == "nccl":
        return wrong(
            f"{machine}: two ranks land on one GPU, and NCCL cannot put two ranks of one "
            "communicator on one device.",
            "the ranks can still share the GPUs if their messages go another way.",
        )
    if ranks > gpus:
        return wrong(f"{machine}: the GPUs can hold the ranks.", "look at the shared path.")
    return wrong(
        f"{machine}: every rank can have a GPU of its own.",
        "with a GPU for every rank, how do the messages travel?",
    )


# ----- 9.2 four ranks on two GPUs ---------------------------------------------------------------

_MAP_RANKS, _MAP_GPUS, _MAP_M = 4, 2, 8


def _gpu_map(answer: object) -> list[int]:
    """The answer as one GPU index per rank (``"cuda:1"`` read as 1)."""
    if not isinstance(answer, list | tuple) or len(answer) != _MAP_RANKS:
        raise ValueError(
            f"this exercise wants one GPU per rank, a list of {_MAP_RANKS} such as "
            f"[0, 1, 0, 1] or ['cuda:0', ...], got {shown(answer)}."
        )
    out = []
    for rank, gpu in enumerate(answer):
        if isinstance(gpu, str) and gpu.startswith("cuda:"):
            gpu = gpu.removeprefix("cuda:")
        try:
            index = int(gpu)
        except (TypeError, ValueError):
            index = -1
        if not 0 <= index < _MAP_GPUS or isinstance(gpu, bool | float):
            raise ValueError(f"rank {rank}: {shown(gpu)} is not GPU 0 or 1.")
        out.append(index)
    return out


@exercise(
    "9.2",
    "Construct a map of 4 pipeline ranks onto 2 GPUs, two ranks each, that sends as few "
    "1F1B messages (m = 8) as possible between the GPUs.",
    kind="construct",
    solution="Put neighbours together: `[0, 0, 1, 1]` (or `[1, 1, 0, 0]`). Only the boundary "
    "between ranks 1 and 2 then crosses GPUs: 8 activations one way and 8 gradients back, "
    "16 messages a step. The round-robin map `[0, 1, 0, 1]` crosses at all three "
    "boundaries: 48. `crossing_messages(gpu_of)` counts them from `sent_by` "
    "(ppbook.runtime.plan).",
    answer_name="answer_2",
)
def _rank_map(answer):
    gpu_of = _gpu_map(answer)
    per_gpu = [gpu_of.count(g) for g in range(_MAP_GPUS)]
    if max(per_gpu) > _MAP_RANKS // _MAP_GPUS:
        crowded = per_gpu.index(max(per_gpu))
        return wrong(
            f"GPU {crowded} holds {max(per_gpu)} of the {_MAP_RANKS} ranks: its memory and "
            "compute are shared by more ranks than the other's.",
            "two ranks on each GPU.",
        )
    balanced = [
        [int(r in chosen) for r in range(_MAP_RANKS)]
        for chosen in combinations(range(_MAP_RANKS), _MAP_RANKS // _MAP_GPUS)
    ]
    fewest = min(crossing_messages(m, _MAP_M) for m in balanced)
    mine = crossing_messages(gpu_of, _MAP_M)
    if mine == fewest:
        return right(f"{mine} messages a step cross between the GPUs, the fewest possible.")
    if gpu_of == [r % _MAP_GPUS for r in range(_MAP_RANKS)]:
        return wrong(
            f"round robin, rank % 2 (the runtime's own map): {mine} messages cross, at every "
            "boundary between neighbours.",
            "a pipeline's messages go only between neighbouring ranks.",
        )
    return wrong(
        f"{mine} messages a step cross between the GPUs; a map with {fewest} exists.",
        "a pipeline's messages go only between neighbouring ranks.",
    )


# ----- 9.3 the makespan under measured costs ----------------------------------------------------

_F, _B, _C = 10.0, 20.0, 0.5
CPU_COSTS = Costs(F=_F, B=_B, comm=_C)
"""Per-stage costs in ms measured on two CPU processes (``data/bench_runtime_cpu.txt``)."""

_COUNT_SLACK = 0.2
"""How far (in transfers) 9.3's answer may sit from a whole count of transfers: the makespan
is the compute plus a whole number of transfers of c, so an answer is judged by the count it
implies (338 ms: 16; 337.5 ms: 15, wrong however close), not by a relative tolerance; 338.1
ms (16.2) is 338 rounded, 338.4 ms (16.8) no count at all."""


@exercise(
    "9.3",
    "With the costs measured on CPU processes, F = 10 ms, B = 20 ms per stage and a 0.5 ms "
    "transfer, compute the makespan (ms) of 1F1B on p = 4 ranks with m = 8.",
    kind="compute",
    solution="`simulate(one_f_one_b(4, 8), Costs(F=10, B=20, comm=0.5)).makespan` = 338 ms: "
    "(m+p-1)(F+B) = 330 ms of compute and waiting, plus 16 transfers on the critical path "
    "(simulate at comm = 0 and comm = 1: the makespan grows by 16 ms per ms of transfer). "
    "GPipe's formula (m+p-1)(F+B) + 2(p-1)c = 333 ms counts only the six transfers of its "
    "fill and drain; 1F1B's steady state waits on messages too (exercise 3.5).",
    answer_name="answer_3",
)
def _makespan(answer):
    given = number(answer, "a time in ms, such as 250")
    p, m = 4, 8
    truth = simulate(one_f_one_b(p, m), CPU_COSTS).makespan
    compute = simulate(one_f_one_b(p, m), replace(CPU_COSTS, comm=0)).makespan
    path = round((truth - compute) / _C)  # transfers on the critical path (16)
    counted = (given - compute) / _C  # the transfers the answer counts
    if abs(counted - path) <= _COUNT_SLACK + 1e-9:
        return right(
            f"{truth:g} ms, as the simulator says under these costs: {compute:g} ms of "
            f"compute and waiting plus {path} transfers of {_C:g} ms on the critical path."
        )
    if close(given, simulate(gpipe(p, m), CPU_COSTS).makespan):
        return wrong(
            f"{given:g} ms is GPipe's (m+p-1)(F+B) + 2(p-1)c: it counts "
            f"{2 * (p - 1)} transfers on the critical path.",
            "1F1B waits on messages in its steady state too: simulate it.",
        )
    if close(given, (m + p - 1) * (_F + _B)):
        return wrong(f"{given:g} ms leaves out the transfers.", "c = 0.5 ms per message.")
    if close(given, m * (_F + _B)):
        return wrong(f"{given:g} ms is one rank's compute, without the bubble.")
    if close(given, p * m * (_F + _B)):
        return wrong(f"{given:g} ms is one process running the whole model.")
    whole = round(counted)
    if abs(counted - whole) <= _COUNT_SLACK + 1e-9 and 0 < whole <= 4 * p * m:
        return wrong(
            f"{given:g} ms is {compute:g} ms plus {whole} transfers of {_C:g} ms; 1F1B's "
            f"critical path holds another number of transfers.",
            "simulate at comm = 0 and comm = 1: the difference is the number of transfers "
            "on the critical path.",
        )
    return wrong(f"{given:g} ms is not 1F1B's makespan here.", "simulate it under these costs.")


# ----- 9.4 m for a bubble target ----------------------------------------------------------------

_TARGET = 0.10


def _fraction(m: int) -> float:
    return simulate(one_f_one_b(2, m), CPU_COSTS).bubble_fraction


@exercise(
    "9.4",
    "With the same measured costs, choose the smallest m at which 1F1B on p = 2 ranks has a "
    "bubble fraction f = idle/total below 0.10.",
    kind="choose",
    solution="Without transfers f = (p-1)/(m+p-1) < 0.1 gives m = 10. With them, simulate "
    "`one_f_one_b(2, m)` under `Costs(F=10, B=20, comm=0.5)` for m = 10, 11, ...: "
    "f = 0.1045 at m = 10 and 0.0984 at m = 11, so m = 11.",
    answer_name="answer_4",
)
def _microbatches(answer):
    given = integer(answer, "a whole number of micro-batches m >= 1", minimum=1, maximum=4096)
    truth = next(m for m in range(1, 4097) if _fraction(m) < _TARGET)
    f = _fraction(given)
    if given == truth:
        return right(f"f = {f:.4f} at m = {given}, and {_fraction(given - 1):.4f} at m - 1.")
    if f >= _TARGET:
        hint = ""
        if (2 - 1) / (given + 2 - 1) < _TARGET:
            hint = "(p-1)/(m+p-1) holds without transfers; the simulator counts them."
        return wrong(f"at m = {given} the simulator gives f = {f:.4f}, not below 0.10.", hint)
    return wrong(f"m = {given} gives f = {f:.4f}, but a smaller m does too.")


# ----- 9.5 a run for the shared path ------------------------------------------------------------


@exercise(
    "9.5",
    "Construct a RunConfig that checks the shared-GPU path on a machine with one GPU: its "
    "gradients compared with one process (to 1e-10, as in exercise 3.6).",
    kind="construct",
    solution="`RunConfig(schedule='1f1b', nproc=2, num_microbatches=4, device='cuda', "
    "dtype='float64', collect_grads=True, timeout=30.0)`: two ranks on one GPU get "
    "`cuda:0` both and talk gloo through host memory (`mode_for(1, nproc=2)`); "
    "`collect_grads` brings the gradients back for `assert_matches_reference`, and only "
    "float64 lets the pipeline and one process agree to 1e-10 (float32 and bfloat16 round "
    "the micro-batch sums apart). "
    "`benchmarks/gpu_demo.py` runs such configs for every schedule.",
    answer_name="answer_5",
)
def _shared_config(answer):
    if not isinstance(answer, RunConfig):
        return wrong(f"this exercise wants a RunConfig(...), got {shown(answer)}.")
    check(replace(answer, device="cpu"))  # everything but the GPU, on this machine
    if answer.device != "cuda":
        return wrong(f"device {answer.device!r} never touches the GPU.", "device='cuda'.")
    if answer.nproc < 2:
        return wrong("one rank sends no message: nothing is shared.", "nproc=2 or more.")
    if not answer.collect_grads:
        return wrong(
            "without collect_grads the gradients stay on the ranks: nothing to compare.",
            "collect_grads=True.",
        )
    if answer.dtype != "float64":
        return wrong(
            f"in {answer.dtype} the pipeline's micro-batch sums round differently from one "
            "process's batch: the comparison (to 1e-10) would fail on rounding, not on a bug "
            "of the shared path.",
            "dtype='float64', as exercise 3.6 asks.",
        )
    mode = mode_for(1, nproc=answer.nproc)
    return right(f"{mode.name} on one GPU: ranks on {', '.join(mode.rank_devices)}, gloo.")


# ----- 9.6 one round trip of the clock alignment ------------------------------------------------

SENT, STAMP, BACK = 10.0, 12.0, 10.6
"""Exercise 9.6, in ms: rank 0 sends at SENT, the peer stamps STAMP, rank 0 reads BACK."""


@exercise(
    "9.6",
    "Rank 0 sends its time at 10.0 ms, rank 1 answers with its own clock's 12.0 ms, and the "
    "answer is back at 10.6 ms on rank 0's clock. Compute rank 1's clock offset (ms).",
    kind="compute",
    solution="NTP's estimate (`ppbook.runtime.clock`): the stamp was taken, at best guess, "
    "half-way through the round trip, at (10.0 + 10.6)/2 = 10.3 ms on rank 0's clock, so "
    "rank 1's clock is 12.0 - 10.3 = 1.7 ms ahead, wrong by at most half the round trip, "
    "0.3 ms.",
    answer_name="answer_6",
)
def _offset(answer):
    given = number(answer, "an offset in ms, such as 1.0")
    truth = STAMP - (SENT + BACK) / 2
    if close(given, truth):
        return right(f"{truth:.4g} ms, within half the round trip, {(BACK - SENT) / 2:.4g} ms.")
    if close(given, -truth):
        return wrong(f"{given:g} ms has the wrong sign.", "rank 1's clock minus rank 0's.")
    if close(given, STAMP - SENT):
        return wrong(
            f"{given:g} ms assumes the stamp was taken as the message left.",
            "the message also took time to travel: take the middle of the round trip.",
        )
    if close(given, STAMP - BACK):
        return wrong(
            f"{given:g} ms assumes the stamp was taken as the answer arrived.",
            "take the middle of the round trip.",
        )
    return wrong(f"{given:g} ms is not the offset.", "stamp - (sent + back) / 2.")
