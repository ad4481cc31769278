"""What two ranks on one GPU and the host-memory path do to each action and message.

Reads the GPU demo's recordings (``data/gpu_demo/``, or the files given) and prints, from
every step after the warm-up of every schedule:

1. overlap: how much of the ranks' compute time overlaps the other rank's, and how long
   an action takes alone against overlapped (by schedule, stage and kind);
2. the gaps between two neighbouring actions of a rank, by what lies between them: a
   message sent by the first, a message taken by the second (already there, or waited
   for), the model's input copied for the second;
3. the mechanism those figures give (:func:`ppbook.runtime.shared_gpu.mechanism`);
4. every schedule's measured makespan against the plain model and the shared-device model
   (:func:`ppbook.runtime.shared_gpu.makespan_table`).

    .venv/bin/python benchmarks/analyse_shared_gpu.py
    .venv/bin/python benchmarks/analyse_shared_gpu.py data/gpu_demo/OTHER.json
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

from ppbook.runtime.recording import load_recordings, read_recording
from ppbook.runtime.result import after_warm_up
from ppbook.runtime.shared_gpu import ALONE, _gaps, makespan_table, overlapped


def overlap_report(timelines) -> list[str]:
    total = shared = 0.0
    alone, together = defaultdict(list), defaultdict(list)
    for timeline in timelines:
        for rank, row in enumerate(timeline.schedule.actions):
            for position, step in enumerate(row):
                duration = timeline.ends[rank][position] - timeline.starts[rank][position]
                o = overlapped(timeline, rank, position)
                total, shared = total + duration, shared + o
                kind = "FB" if len(step.parts) > 1 else step.kind
                key = (timeline.schedule.name, step.parts[0].stage, kind)
                if o < ALONE * duration:
                    alone[key].append(duration)
                elif o > 0.5 * duration:
                    together[key].append(duration)
    ratios = [
        statistics.fmean(together[k]) / statistics.fmean(alone[k])
        for k in alone
        if k in together and statistics.fmean(alone[k]) > 0
    ]
    return [
        f"compute time overlapping the other rank's: {shared / total:.0%} of {1e3 * total:.1f} ms",
        f"mean duration, more than half overlapped / alone: median {statistics.median(ratios):.2f}"
        f" over {len(ratios)} (schedule, stage, kind) groups "
        f"(quartiles {', '.join(f'{q:.2f}' for q in statistics.quantiles(ratios, n=4))})",
    ]


def gap_report(timelines, send_copy: float) -> list[str]:
    groups = defaultdict(list)
    transfers = []  # producer's end to consumer's start, where the consumer waited
    for gap, sent, incoming, model, _, end in _gaps(timelines):
        if len(incoming) > 1:
            continue
        if incoming:
            produced, copies = incoming[0]
            handed = produced + copies * send_copy
            waited = handed > end + sent * send_copy
            state = "waited for" if waited else "already there"
            if waited and copies == 1:
                transfers.append(end + gap - produced)
            taken = f"takes a message ({state})"
        else:
            taken = "takes no message"
        what = f"first sends {sent}, second {taken}" + (", copies the input" if model else "")
        groups[what].append(gap)
    lines = [f"{'between two actions of a rank':62} {'n':>4} {'median':>8} {'min':>7} {'max':>7}"]
    for what, gaps in sorted(groups.items()):
        lines.append(
            f"{what:62} {len(gaps):4d} {1e3 * statistics.median(gaps):8.3f} "
            f"{1e3 * min(gaps):7.3f} {1e3 * max(gaps):7.3f}"
        )
    lines.append("(gaps in ms; 'waited for' gaps include the time the message took)")
    lines.append(
        f"a message waited for, from its producer's end to its consumer's start: median "
        f"{1e3 * statistics.median(transfers):.3f} ms over {len(transfers)} (quartiles "
        f"{', '.join(f'{1e3 * q:.3f}' for q in statistics.quantiles(transfers, n=4))})"
    )
    return lines


def main(argv: list[str]) -> int:
    recordings = [read_recording(path) for path in argv] if argv else load_recordings()
    if not recordings:
        print("no recording in data/gpu_demo/ (make gpu-demo writes one)")
        return 1
    for recording in recordings:
        print(f"== {recording.path}")
        print(recording.describe())
        timelines = [t for steps in recording.runs.values() for t in after_warm_up(steps)]
        found = recording.mechanism
        print("\n1. overlap on the shared device")
        print(*overlap_report(timelines), sep="\n")
        print("\n2. gaps between neighbouring actions of a rank")
        print(*gap_report(timelines, found.send_copy), sep="\n")
        print("\n3. the mechanism (ppbook.runtime.shared_gpu.mechanism)")
        print(*found.lines(), sep="\n")
        both = found.send_copy + found.recv_copy + found.latency
        print(f"send + receive copy + in flight = {1e3 * both:.3f} ms: one message, end to start")
        print("\n4. makespans: measured against simulated under the costs measured in the run")
        print(makespan_table(recording))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
