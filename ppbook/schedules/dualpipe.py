"""DualPipe and DualPipeV: two pipelines folded onto the same ranks, forward and backward
chunks overlapped in pairs.

DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", arXiv:2412.19437, sec. 3.2.1 and
Table 2; reference implementation github.com/deepseek-ai/DualPipe
(``dualpipe/dualpipe.py``, whose steps this module follows). DualPipeV, DualPipe cut in
half, as PyTorch's ``ScheduleDualPipeV`` (torch 2.13).

Both run, on each rank, the same eight steps (DualPipe's names; ``0`` is the chunk
whose micro-batches come from the nearer end of the pipeline, ``1`` the other one):

1. ``nF0``: warm-up forwards of chunk 0;
2. ``nF0F1``: forwards of both chunks;
3. ``nB1W1F1``: chunk 1's backward split into I and W (zero bubble), then a forward;
4. ``nF0B1F1B0``: the main step, two overlapped forward-and-backward pairs;
5. ``nB1F1B0``: a backward, then an overlapped pair;
6. ``nB1B0``: backwards only, the second half split into I and W;
7. ``nWB0``: a postponed W, then a split backward;
8. ``nW``: the remaining W passes, oldest first.

An overlapped pair is an :class:`~ppbook.pipeline_schedule.OverlapFB` of a forward and a full
backward ``B``; the simulator times it as ``Costs(FB=...)`` (default F + B).

DualPipe's table (B the full backward, F&B one overlapped pair, PP pipeline stages):
bubble (PP/2-1)(F&B+B-3W), activations PP+1 per device; DualPipe runs PP = p ranks,
DualPipeV PP/2 = p ranks. Under this simulator, with no communication and the same
F, I, W, F&B on every stage chunk:

- Activations (chunk activations, as Timeline counts them): every rank peaks at exactly
  p+1 in DualPipe and 2p+1 in DualPipeV, the table's PP+1.
- Bubble: when F = I, W <= F and F&B >= F+W, the middle ranks (DualPipe: p/2-1 and p/2;
  DualPipeV: p-1, the bottom of the V) idle exactly (P-1)(F&B+B-3W), with P = p/2 for
  DualPipe and P = p for DualPipeV: the table's bubble. The makespan is then that plus
  the middle rank's compute, 2M(F+B) - (2M-2P-1)(F+B-F&B) with M = m/2 (DualPipe) or
  M = m (DualPipeV): the middle rank runs 2M-2P-1 overlapped pairs. Ranks nearer the
  ends overlap fewer pairs, so when F&B < F+B they compute longer and idle less; when
  F&B = F+B every rank idles exactly the table's bubble.
- Outside those conditions the simulated idle time differs from the table, either way:
  DualPipe's middle ranks idle 4(p/2-1) - 1 instead of 4(p/2-1) with F = 1, I = 2,
  W = 1, F&B = 4, and 3(p/2-1) instead of 2(p/2-1) with F = 2, I = 1, W = 1, F&B = 3.
"""

from __future__ import annotations

from collections import defaultdict, deque

from ppbook.pipeline_schedule import Action, OverlapFB, Schedule, Step
from ppbook.schedules.rules import check_counts
from ppbook.schedules.zero_bubble import v_placement


def dualpipe(num_stages: int, num_microbatches: int) -> Schedule:
    """DualPipe (DeepSeek-V3, arXiv:2412.19437): micro-batches fed from both ends at once.

    ``num_stages`` is p, the number of ranks (even). Half of the ``num_microbatches``
    (0..m/2-1) go down through stages 0..p-1 on ranks 0..p-1; the other half (m/2..m-1) go
    up through stages p..2p-1 on ranks p-1..0. Stage p+k is a copy of model part k, so each
    rank holds two parts and the parameters are stored twice. Needs p even, m even and
    m >= 2p (DualPipe's own asserts). Schedule.routes records the two directions.
    """
    p, m = check_counts("dualpipe", num_stages, num_microbatches, num_chunks=2)
    if p % 2:
        raise ValueError(
            f"dualpipe needs an even num_stages (p ranks, half fed from each end), got p = {p}"
        )
    if m % 2 or m < 2 * p:
        raise ValueError(
            "dualpipe needs num_microbatches even and >= 2 * num_stages (m/2 from each end, "
            f"m >= 2p), got m = {m} with p = {p}; try m = {max(2 * p, m + m % 2)}"
        )
    half = m // 2
    actions = []
    for rank in range(p):
        down = (rank, 0)  # (stage, first micro-batch) of the downward pipeline
        up = (2 * p - 1 - rank, half)  # and of the upward one
        near, far = (down, up) if rank < p // 2 else (up, down)
        actions.append(_eight_steps(p // 2, min(rank, p - 1 - rank), half, near, far))
    routes = [tuple(range(p))] * half + [tuple(range(p, 2 * p))] * half
    return Schedule(actions, v_placement(p), m, name="dualpipe", routes=routes)


def dualpipev(num_stages: int, num_microbatches: int) -> Schedule:
    """DualPipeV (DeepSeek's DualPipe "cut in half"; PyTorch ``ScheduleDualPipeV``).

    ``num_stages`` is p, the number of ranks; the model is cut into 2p stage chunks in a V
    (rank r holds chunks r and 2p-1-r), every micro-batch goes down and back up, and
    DualPipe's eight steps run with chunk 0 = stage r and chunk 1 = stage 2p-1-r. The
    action order is PyTorch's. Needs m >= 2p (PyTorch's rule: at least as many
    micro-batches as stages).
    """
    p, m = check_counts("dualpipev", num_stages, num_microbatches, num_chunks=2, passes=3)
    if m < 2 * p:
        raise ValueError(
            "dualpipev needs num_microbatches >= 2 * num_stages (at least one micro-batch "
            f"per stage chunk, m >= 2p), got m = {m} with p = {p}; use m >= {2 * p}"
        )
    actions = [_eight_steps(p, rank, m, (rank, 0), (2 * p - 1 - rank, 0)) for rank in range(p)]
    return Schedule(actions, v_placement(p), m, name="dualpipev")


def _eight_steps(
    ranks: int, position: int, chunks: int, near: tuple[int, int], far: tuple[int, int]
) -> list[Step]:
    """One rank's order: DualPipe's eight steps (see the module docstring).

    ``ranks`` ranks fold one pipeline (DualPipe: half of them, p/2), this rank is
    ``position`` ranks from its near end, and ``chunks`` micro-batches run through each
    of its two stages. ``near`` and ``far`` are (stage, first micro-batch) of chunk 0 and 1.
    """
    stage = (near[0], far[0])
    first = {near[0]: near[1], far[0]: far[1]}
    done: defaultdict[tuple[int, str], int] = defaultdict(int)  # forwards, backwards so far
    weights: deque[Action] = deque()  # I passes whose W is still to run, oldest first
    row: list[Step] = []

    def action(chunk: int, kind: str) -> Action:
        s, counted = stage[chunk], "F" if kind == "F" else "B"
        a = Action(s, kind, first[s] + done[s, counted])
        done[s, counted] += 1
        if kind == "I":
            weights.append(Action(s, "W", a.microbatch))
        return a

    def weight() -> None:
        row.append(weights.popleft())

    def pair(forward_chunk: int) -> OverlapFB:
        return OverlapFB(action(forward_chunk, "F"), action(1 - forward_chunk, "B"))

    others = ranks - position - 1  # ranks between this one and the fold (the middle rank)
    row += [action(0, "F") for _ in range(2 * others)]  # 1: nF0
    for _ in range(position + 1):  # 2: nF0F1
        row += [action(0, "F"), action(1, "F")]
    for _ in range(others):  # 3: nB1W1F1, zero bubble
        row.append(action(1, "I"))
        weight()
        row.append(action(1, "F"))
    for i in range(chunks - 2 * ranks + position + 1):  # 4: nF0B1F1B0, the main step
        if i == 0 and others == 0:  # the middle rank runs its first pair apart (less bubble)
            row += [action(0, "F"), action(1, "B")]
        else:
            row.append(pair(0))
        row.append(pair(1))
    for _ in range(others):  # 5: nB1F1B0
        row += [action(1, "B"), pair(1)]
    split = False
    for i in range(position + 1):  # 6: nB1B0, the second half split into I and W
        if i == (position + 1) // 2 and position % 2 == 1:
            split = True
        row.append(action(1, "I" if split else "B"))
        if i == (position + 1) // 2 and position % 2 == 0:
            split = True
        row.append(action(0, "I" if split else "B"))
    for _ in range(others):  # 7: nWB0
        weight()
        row.append(action(0, "I"))
    for _ in range(position + 1):  # 8: nW
        weight()
    return row
