"""``ppbook run`` without --nproc: two ranks, or as many as a --from-csv schedule has rows."""

import argparse

from ppbook.cli import run as run_cli
from ppbook.pytorch_csv import write_csv
from ppbook.schedules import build


def config(argv):
    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    return run_cli.make_config(parser.parse_args(argv), None)


def test_without_nproc_a_named_schedule_gets_two_ranks_and_eight_microbatches():
    made = config(["--schedule", "gpipe"])
    assert (made.nproc, made.num_microbatches) == (2, 8)


def test_without_nproc_a_csv_schedule_gets_one_rank_per_row(tmp_path):
    path = tmp_path / "three.csv"
    write_csv(build("1f1b", 3, 6), path)
    made = config(["--from-csv", str(path)])
    assert (made.nproc, made.num_microbatches) == (3, 6)
