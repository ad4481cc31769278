"""The communication model's input: one-line errors for bad links, topologies and costs,
and ``ppbook simulate``'s communication options (makespans worked out by hand in
test_links)."""

import pytest

from ppbook.cli import main
from ppbook.cost_model.model_shape import Parallel
from ppbook.cost_model.step_work import collective_s, dp_collectives, ring_bytes
from ppbook.costs import Costs
from ppbook.links import Link, Topology, boundary_bytes, collective_gbps, pipeline_message_bytes
from ppbook.schedules import gpipe
from ppbook.simulate import simulate


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Link(bandwidth=-1), r"Link needs bandwidth \(bytes per time unit\) to be a"),
        (lambda: Link(latency=-1), "Link needs latency to be a finite number >= 0"),
        (lambda: Topology(Link(), Link()), "devices_per_node and inter_node together"),
        (lambda: Topology(Link(), placement=[0, 0]), "puts ranks 0 and 1 on device 0"),
        (lambda: Topology(Link(), placement=[0, -1]), r"placement\[1\] \(a device\) >= 0"),
        (lambda: Topology("fast"), "intra_node to be a ppbook.links.Link, got str"),
        (lambda: Costs(topology=Topology(Link()), comm=1), "leave comm and bandwidth unset"),
        (lambda: Costs(contention="yes"), "contention to be True or False"),
        (lambda: Costs(comm_bytes=8, topology=Topology(Link(1))), "bandwidth .* on the topo"),
        (lambda: Costs(topology={"links": 1}), "topology to be a ppbook.links.Topology"),
        (lambda: boundary_bytes(0, 1, 1, 2), "boundary_bytes needs microbatch_size >= 1"),
        (lambda: Link.from_gb_per_s(1, time_unit_s=0), "time_unit_s to be a finite number > 0"),
        (
            lambda: simulate(gpipe(3, 1), Costs(topology=Topology(Link(), placement=[0, 1]))),
            "placement gives devices for 2 ranks, but the schedule has 3",
        ),
        (lambda: collective_gbps(0, 1, 450, 50), "collective_gbps needs group_size >= 1"),
        (lambda: collective_gbps(4, 8, 450, 50), "members_per_node <= group_size = 4"),
        (lambda: collective_gbps(16, 8, 450, 0), "nic_gbps to be a finite number > 0"),
        (lambda: pipeline_message_bytes(1, 8, 8, 2, tp=0), "needs tp >= 1"),
        (lambda: pipeline_message_bytes(1, 8, 8, 2, 2, scatter_gather=1), "True or False"),
        (lambda: ring_bytes("broadcast", 8, 2), "collective must be one of all-reduce"),
        (lambda: ring_bytes("all-reduce", -8, 2), "ring_bytes needs nbytes"),
        (lambda: collective_s("all-gather", 8, 2, float("inf")), "gb_per_s to be a finite"),
        (lambda: dp_collectives(10, Parallel(), 0), "num_microbatches >= 1"),
    ],
)
def test_bad_input_is_a_one_line_value_error(make, message):
    with pytest.raises(ValueError, match=message) as excinfo:
        make()
    assert "\n" not in str(excinfo.value)


def run(capsys, *argv):
    status = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    "extra, makespan",
    [
        ([], 16),
        (["--contention"], 18),
        (["--no-overlap-send"], 24),
        (["--contention", "--no-overlap-send"], 24),
    ],
)
def test_command_line_link_options(capsys, extra, makespan):
    argv = ["--schedule", "gpipe", "--stages", "2", "--microbatches", "3", "--json"]
    status, out, _ = run(capsys, *argv, "--message-bytes", "4", "--bandwidth", "2", *extra)
    assert status == 0 and f'"makespan": {makespan}.0' in out


def test_command_line_topology(capsys):
    argv = ["--schedule", "gpipe", "--stages", "16", "--microbatches", "1", "--json"]
    nodes = ["--comm", "1", "--devices-per-node", "8", "--inter-node-latency", "10"]
    status, out, _ = run(capsys, *argv, *nodes)
    assert status == 0 and '"makespan": 96.0' in out
    spread = ",".join(str((r % 2) * 8 + r // 2) for r in range(16))
    status, out, _ = run(capsys, *argv, *nodes, "--placement", spread)
    assert status == 0 and '"makespan": 348.0' in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--inter-node-bandwidth", "5"], "--inter-node-bandwidth needs --devices-per-node"),
        (["--bandwidth", "-1"], "needs --bandwidth to be a finite number > 0, got -1.0"),
        (["--message-bytes", "4"], "comm_bytes needs a bandwidth"),
        (["--devices-per-node", "0"], "--devices-per-node must be >= 1, got 0"),
        (["--devices-per-node", "2", "--placement", "0,a"], "--placement must be device numbers"),
        (["--devices-per-node", "2", "--placement", "0"], "devices for 1 ranks, but the sch"),
    ],
)
def test_command_line_bad_link_options(capsys, argv, message):
    base = ["--schedule", "gpipe", "--stages", "2", "--microbatches", "2"]
    status, _, err = run(capsys, *base, *argv)
    assert status == 2 and message in err and err.count("\n") == 1
