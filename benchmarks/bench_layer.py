"""The layer time model (:mod:`ppbook.cost_model.layer_time`): its fit to the H200 and how fast
``ppbook layer`` answers.

Run: ``.venv/bin/python benchmarks/bench_layer.py [--fit] [--repeat N]`` (not a test; no
timing is asserted anywhere).

``--fit`` fits the model's four free constants (:data:`FREE`: the GEMM efficiency curve's
saturation and half-point, causal flash attention's backward efficiency and the backward
GEMMs' share of the forward's efficiency) by least squares of log(model / measured) over
``F``, ``I``, ``W`` and ``B`` of the four layers timed on an NVIDIA H200
(``data/h200_layer_times.jsonl``), with flash attention's forward efficiency and the HBM
efficiency held at their stated values (the four layers do not pin them: any flash
forward efficiency from 0.35 to 0.55 fits about as well). It prints the fitted constants,
to be stored in ``ppbook/layer_time.py``, and the sixteen times against the model.

Without ``--fit``: the sixteen times under the stored constants, then the wall time of
``ppbook layer`` in-process (``main(["layer", ...])``, best of ``--repeat``) beyond the
interpreter's start-up. Goal: under 0.5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import time
from pathlib import Path

import numpy as np

from ppbook.cost_model.layer_time import Constants, Device, layer_times
from ppbook.cost_model.memory_bytes import ModelShape, Parallel

DATA = Path(__file__).resolve().parents[1] / "data" / "h200_layer_times.jsonl"
H200 = Device.of(989.0, 4800.0)  # the H200's card (ppbook/data/gpu_cards.json)
FREE = ("gemm_efficiency", "gemm_half_ridge", "flash_backward_efficiency", "gemm_backward")
"""The constants the fit moves; the others keep their stored values."""
GOAL_S = 0.5


def measured() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def model(row: dict, c: Constants) -> dict[str, float]:
    shape = ModelShape(1, row["hidden"], row["heads"], 32000, row["seq"])
    return layer_times(shape, Parallel(microbatch_size=row["mb"]), H200, "flash", False, c)


def residuals(c: Constants, rows: list[dict]) -> np.ndarray:
    return np.array([math.log(model(r, c)[k] * 1e3 / r[f"{k}_ms"]) for r in rows for k in "FIWB"])


def fit(rows: list[dict]) -> Constants:
    """Gauss-Newton on the free constants, from the stored ones (numerical derivatives)."""
    c = Constants()
    for _ in range(100):
        r = residuals(c, rows)
        columns = []
        for name in FREE:
            value = getattr(c, name)
            columns.append(
                (residuals(c._replace(**{name: value * 1.001}), rows) - r) / (value * 1e-3)
            )
        jac = np.array(columns).T
        step = np.linalg.solve(jac.T @ jac + 1e-9 * np.eye(len(FREE)), -jac.T @ r)
        c = c._replace(**{n: getattr(c, n) + s for n, s in zip(FREE, step, strict=True)})
        if np.abs(step).max() < 1e-10:
            break
    return c


def table(c: Constants, rows: list[dict]) -> str:
    lines = [f"{'h':>6} {'pass':>4} {'measured ms':>12} {'model ms':>9} {'model/meas':>10}"]
    for r in rows:
        times = model(r, c)
        for k in "FBIW":
            lines.append(
                f"{r['hidden']:>6} {k:>4} {r[f'{k}_ms']:>12.2f} {times[k] * 1e3:>9.2f} "
                f"{times[k] * 1e3 / r[f'{k}_ms']:>10.3f}"
            )
    return "\n".join(lines)


def answer_time(repeat: int) -> float:
    from ppbook.cli import main

    argv = ["layer", "--hidden", "8192", "--heads", "64", "--seq-len", "4096"]
    argv += ["--microbatch-size", "1", "--tp", "2", "--json"]
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(argv)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="fit the free constants again")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = measured()
    c = fit(rows) if args.fit else Constants()
    if args.fit:
        print("fitted (store in ppbook/layer_time.py):")
        for name in FREE:
            print(f"  {name} = {getattr(c, name):.4f}")
    worst = np.abs(np.exp(residuals(c, rows)) - 1).max()
    print(table(c, rows))
    print(f"largest |model / measured - 1|: {worst:.3f} (target 0.10)")
    if not args.fit:
        print(f"ppbook layer in-process: {answer_time(args.repeat):.4f} s (goal {GOAL_S:g} s)")


if __name__ == "__main__":
    main()
