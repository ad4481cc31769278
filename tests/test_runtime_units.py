"""The runtime's pieces in one process: stages, messages, argument checks, measurement.

No process is started here; tests/test_runtime_runs.py runs real pipelines.
"""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch.nn import functional

from ppbook.cli import run as run_cli
from ppbook.costs import Costs
from ppbook.runtime.comm import decode_header, encode_header
from ppbook.runtime.config import Fault, RunConfig, check
from ppbook.runtime.context import _decode_address, is_loopback
from ppbook.runtime.examples import (
    overlapped_pair,
    split_one_f_one_b,
    two_routes,
)
from ppbook.runtime.measure import measured_costs, transfer_gaps
from ppbook.runtime.models import mlp, part_bounds, split_blocks, transformer
from ppbook.runtime.plan import ACTIVATION, GRADIENT, describe
from ppbook.runtime.stage import Stage
from ppbook.schedule import Schedule
from ppbook.schedules import gpipe, one_f_one_b
from ppbook.simulate import simulate

# ----- stages: F, B, and the split I + W --------------------------------------------------


@pytest.mark.parametrize("model", ["mlp", "transformer"])
@pytest.mark.parametrize("split", [False, True])
def test_stages_give_the_gradients_of_the_whole_model(model, split):
    torch.manual_seed(0)
    blocks = mlp(6, 3) if model == "mlp" else transformer(8, 3)
    shape = (3, 6) if model == "mlp" else (3, 4, 8)
    whole = torch.nn.Sequential(*copy.deepcopy(blocks)).double()
    x, target = torch.randn(shape, dtype=torch.float64), torch.randn(shape, dtype=torch.float64)
    functional.mse_loss(whole(x), target).backward()

    parts = [p.double() for p in split_blocks(blocks, 2)]
    log: list[str] = []
    first = Stage(0, parts[0], num_microbatches=1, first=True, log=log)
    last = Stage(
        1,
        parts[1],
        num_microbatches=1,
        first=False,
        loss_fn=functional.mse_loss,
        log=log,
    )
    last.forward(0, first.forward(0, x).detach(), target)
    if split:
        first.backward_input(0, last.backward_input(0, None))
        assert all(p.grad is None for p in parts[0].parameters()), "I must not touch weights"
        last.backward_weight(0)
        first.backward_weight(0)
        assert log == ["0F0", "1F0", "1I0", "0I0", "1W0", "0W0"]
    else:
        first.backward(0, last.backward(0, None))
        assert log == ["0F0", "1F0", "1B0", "0B0"]
    expected = dict(whole.named_parameters())
    bounds = part_bounds(3, 2)
    for k, part in enumerate(parts):
        for name, param in part.named_parameters():
            index, _, rest = name.partition(".")
            reference = expected[f"{bounds[k][0] + int(index)}.{rest}"].grad
            torch.testing.assert_close(param.grad, reference, rtol=1e-12, atol=1e-12)
    assert not first.saved and not first.weight_work and not last.weight_work


def test_part_bounds_cut_evenly_and_refuse_too_few_blocks():
    assert part_bounds(5, 2) == [(0, 3), (3, 5)]
    assert part_bounds(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    with pytest.raises(ValueError, match="at least 3 blocks"):
        part_bounds(2, 3)


# ----- messages -----------------------------------------------------------------------------


def test_header_round_trip_and_names():
    tensor = torch.zeros(4, 3, 2, dtype=torch.float64)
    header = encode_header((2, GRADIENT, 5), tensor)
    assert decode_header(header) == ((2, GRADIENT, 5), torch.float64, [4, 3, 2])
    assert describe((1, ACTIVATION, 3)) == "activation for 1F3"
    assert describe((0, GRADIENT, 2)) == "gradient for 0B2"
    with pytest.raises(ValueError, match="dimensions"):
        encode_header((0, 0, 0), torch.zeros([1] * 7))


def test_proc_net_addresses_decode():
    assert _decode_address("0100007F:1F90") == "127.0.0.1:8080"
    assert _decode_address("00000000:0050") == "0.0.0.0:80"
    assert _decode_address("00000000000000000000000001000000:0050") == "[::1]:80"
    assert is_loopback("127.0.0.1:8080") and is_loopback("[::1]:80")
    assert not is_loopback("0.0.0.0:80") and not is_loopback("192.0.2.2:80")


# ----- bad arguments are refused before any process starts ----------------------------------


def custom(rows, **kw) -> Schedule:
    return Schedule.from_strings(rows, **kw)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (RunConfig(schedule="no-such"), "unknown schedule 'no-such'"),
        (
            RunConfig(schedule="interleaved-1f1b", num_microbatches=5),
            "multiple of its number of rounds",
        ),
        (RunConfig(num_microbatches=0), "num_microbatches >= 1"),
        (RunConfig(nproc=3, schedule=custom([["0F0", "0B0"], ["1F0", "1B0"], []])), "more ranks"),
        (RunConfig(nproc=3, schedule=gpipe(2, 2)), "runs on 2 ranks, but nproc is 3"),
        (RunConfig(num_blocks=1), "fewer than the 2 pipeline parts"),
        (RunConfig(model="resnet"), "unknown model 'resnet'"),
        (RunConfig(model=[torch.nn.Linear(2, 2)] * 2), "needs input_shape"),
        (RunConfig(dtype="float16"), "dtype must be one of"),
        (RunConfig(timeout=0), r"timeout \(seconds\) to be a finite number > 0"),
        (RunConfig(steps=0), "the run needs steps >= 1, got 0"),
        (RunConfig(fault=Fault("raise", 5, 0)), "fault on rank 5"),
        # 1F1B with m = 4: each rank runs 8 actions a step, so action 8 would never come
        (RunConfig(num_microbatches=4, fault=Fault("raise", 1, 8)), r"runs actions 0\.\.7 in a"),
        (RunConfig(fault=Fault("raise", 1, "later")), "fault at action 'later' of rank 1"),
        (RunConfig(fault=("raise", 1, 2)), "fault must be a Fault"),
        (RunConfig(schedule=custom([["0F0", "0B0"], ["1B0", "1F0"]])), "cannot finish"),
    ],
)
def test_bad_arguments_are_value_errors(config, message):
    with pytest.raises(ValueError, match=message):
        check(config)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a CPU-only machine")
def test_cuda_on_a_cpu_machine_is_refused():
    with pytest.raises(ValueError, match="needs a GPU"):
        check(RunConfig(device="cuda"))


def test_fault_spec():
    assert Fault.parse("raise@1:2") == Fault("raise", 1, 2)
    assert Fault.parse("abort@0:end") == Fault("abort", 0, "end")
    with pytest.raises(ValueError, match="KIND@RANK:POSITION"):
        Fault.parse("crash@1")


def test_cli_refuses_bad_arguments_with_status_2(capsys):
    assert run_cli.main(["--schedule", "no-such", "--nproc", "2"]) == 2
    assert "ppbook run: error: unknown schedule 'no-such'" in capsys.readouterr().err
    assert run_cli.main(["--schedule", "interleaved-1f1b", "--microbatches", "5"]) == 2
    assert "multiple of its number of rounds" in capsys.readouterr().err


def test_ppbook_cli_run_refuses_bad_arguments(capsys):
    from ppbook.cli import main

    assert main(["run", "--nproc", "3", "--schedule", "1f1b", "--blocks", "2"]) == 2
    assert "ppbook run: error:" in capsys.readouterr().err


def test_registering_run_does_not_import_torch():
    code = (
        "import argparse, sys\n"
        "from ppbook.cli import run as cli\n"
        "cli.add_parser(argparse.ArgumentParser().add_subparsers())\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----- measurement: costs read off a timeline -----------------------------------------------


@pytest.mark.parametrize(
    "schedule", [gpipe(3, 4), one_f_one_b(3, 6), split_one_f_one_b(2, 4), two_routes()]
)
def test_measured_costs_recover_the_costs_of_a_simulation(schedule):
    costs = Costs(F=[1.0 + 0.1 * s for s in range(schedule.num_stages)], B=2.5, comm=0.25)
    if schedule.split_backward:
        costs = Costs(F=1.0, I=1.5, W=1.0, comm=0.25)
    timeline = simulate(schedule, costs)
    recovered = measured_costs([timeline])
    assert recovered.transfer == pytest.approx(0.25)
    gaps = transfer_gaps(timeline)
    assert gaps and all(gap == pytest.approx(0.25) for gap in gaps)
    assert simulate(schedule, recovered).makespan == pytest.approx(timeline.makespan)


def test_measured_costs_of_an_overlapped_pair():
    schedule = overlapped_pair()
    timeline = simulate(schedule, Costs(F=1.0, B=2.0, FB=2.5, comm=0.1))
    assert measured_costs([timeline]).FB[1] == pytest.approx(2.5)
