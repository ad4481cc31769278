"""The cost model the simulator times a schedule under.

Compute costs are in any time unit: ``F`` (forward), ``B`` (full backward), ``I``
(backward for the input only) and ``W`` (weight-gradient pass), PyTorch's kinds. Given
only ``B``, ``I`` and ``W`` default to half of it each; given ``I`` and ``W``, ``B``
defaults to their sum; given none, ``B = 2 F`` (the usual rule of thumb: a backward costs
two forwards). All three may be given apart: measured on real hardware, a split backward
``I + W`` often costs more than the full ``B`` (schedules such as DualPipeV run both).
An overlapped forward-and-backward pair (DualPipe's F&B) takes ``F + B`` of its two
stages unless ``FB`` gives its own time.

The cost of a chunk (one convention across the package): a cost is the time of one pass
of one micro-batch through ONE DEVICE'S SHARE of the model (1/p of its layers). A schedule
whose micro-batch routes pass through more stages than there are ranks runs each chunk
pass in ``cost * share`` with ``share = num_ranks / len(route)``
(:attr:`ppbook.pipeline_schedule.Schedule.chunk_share`: 1/v for interleaved 1F1B with v chunks,
1/2 for ZB-V and DualPipeV, 1 for GPipe, 1F1B, ZB-H1, ZB-H2 and DualPipe).
:meth:`Costs.per_stage` applies the share, so the same ``Costs`` compare schedules with
different v fairly. ``activation_bytes`` follows the same convention (bytes of one
micro-batch's activations of one device's share); the transfer cost is not scaled.

Every dependency that crosses ranks pays a transfer time ``comm + comm_bytes / bandwidth``:
``comm`` is the latency, ``comm_bytes`` the size of one message (one stage boundary's
activation or gradient, :func:`ppbook.links.boundary_bytes`) and ``bandwidth`` the link's
bytes per time unit. By default the transfer delays the receiver but does not occupy
either rank or the link (communication overlaps compute, and messages never queue), so
GPipe's makespan grows by ``2 (p - 1) * transfer``. Three fields refine this
(:mod:`ppbook.links` says what a link is):

- ``topology``: a :class:`~ppbook.links.Topology` gives each pair of ranks its link (a
  fast one inside a node, a slower one across nodes); its links' latencies and bandwidths
  replace ``comm`` and ``bandwidth``;
- ``contention``: messages on the same link (one direction between two ranks) queue in
  the order the sender runs the actions that send them; each holds the link for its
  serialisation ``comm_bytes / bandwidth``, and arrives ``latency`` after it has left;
- ``overlap_send=False``: the sender sends its output itself when the action's compute
  ends, and is busy until the bytes have left (their serialisation): the action's
  interval on the timeline covers its compute and this send, and busy time counts both.
  The latency never occupies the sender. A rank that waits for each of its sends never
  finds its own link still busy, so contention then changes nothing.

Two more refine it for ranks that copy each message through host memory, as two ranks on
one GPU do (chapter 9, the GPU demo's shared-GPU mode), and for ranks that share a device
(a topology's ``ranks_per_device``):

- ``send_copy``: after an action's compute the sender is busy this long for each message
  it sends to another rank (the device-to-host copy and handing it to the transport),
  before the message leaves; the action's interval ends with its compute;
- ``recv_copy``: before an action's compute the receiver is busy this long for each
  message it takes from another rank (the host-to-device copy), once the message is there;
- ``input_copy``: before a forward on the first stage of its micro-batch's route the rank
  is busy this long (the copy of the model's input from host memory to the device).

With either, or with ranks sharing a device, :mod:`ppbook.shared_device` times the
schedule (:attr:`Costs.device_model`).

Every number goes through :mod:`ppbook.checks` (``int``, ``float``, ``Fraction``,
``Decimal`` and numpy scalars are accepted; ``bool``, strings, NaN and infinity are not)
and is stored as a ``float``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ppbook.checks import as_quantity, finite_result, is_real, shown
from ppbook.links import Link, Topology

Cost = float | Sequence[float]
KEYS = ("F", "B", "I", "W", "FB")
"""The cost keys of :meth:`Costs.parse` (``--costs``), the ones :meth:`Costs.per_stage` scales."""


@dataclass(frozen=True)
class Costs:
    """Per-stage compute costs and the point-to-point transfer cost.

    Each of ``F``, ``B``, ``I``, ``W``, ``FB`` and ``activation_bytes`` is a number (the
    same for every stage) or a list with one number per stage, stored as a ``float`` or a
    tuple of floats. Costs are for one device's share of the model (see the module's
    docstring); ``comm`` is the time of one transfer, ``comm_bytes / bandwidth`` adds to it.
    ``topology``, ``contention`` and ``overlap_send`` are the communication model's
    refinements (the module's docstring); the defaults keep the plain transfer time.
    ``w_memory`` is the share of a micro-batch's activations that a split backward keeps
    from the end of its ``I`` to the end of its ``W`` (the Zero Bubble paper's M_W / M_B,
    its Table 1: about 32 / (34 + 5as/h) for a transformer layer); the default 1 keeps all
    of them until ``W``. ``time_unit`` names the unit of every time here (``"time unit"``
    when the costs are unitless, ``"s"`` for seconds); simulated timelines carry it.
    ``send_copy`` and ``recv_copy`` are the time a message occupies its sender after the
    action and its receiver before it, ``input_copy`` the time the model's input occupies
    the first stage's rank before its forward (the module's docstring; default 0).
    """

    F: Cost = 1.0
    B: Cost | None = None
    I: Cost | None = None  # noqa: E741 (PyTorch's name for the input-gradient pass)
    W: Cost | None = None
    FB: Cost | None = None
    comm: float = 0.0
    comm_bytes: float = 0.0
    bandwidth: float | None = None
    activation_bytes: Cost | None = None
    topology: Topology | None = None
    contention: bool = False
    overlap_send: bool = True
    w_memory: float = 1.0
    time_unit: str = "time unit"
    send_copy: float = 0.0
    recv_copy: float = 0.0
    input_copy: float = 0.0

    def __post_init__(self) -> None:
        for name in (*KEYS, "activation_bytes"):
            value = getattr(self, name)
            if value is None and name != "F":
                continue
            object.__setattr__(self, name, _as_cost(name, value))
        for name in ("comm", "comm_bytes", "send_copy", "recv_copy", "input_copy"):
            object.__setattr__(self, name, as_quantity(getattr(self, name), name, "Costs"))
        if self.bandwidth is not None:
            bandwidth = as_quantity(
                self.bandwidth, "bandwidth (bytes per time unit)", "Costs", inclusive=False
            )
            object.__setattr__(self, "bandwidth", bandwidth)
        elif self.comm_bytes and self.topology is None:
            raise ValueError("comm_bytes needs a bandwidth (bytes per time unit) to turn into time")
        if not isinstance(self.time_unit, str) or not self.time_unit.strip():
            raise ValueError(
                f"Costs needs time_unit to name the unit of its times, such as 's' or "
                f"'time unit', got {shown(self.time_unit)}"
            )
        w_memory = as_quantity(self.w_memory, "w_memory (a share from 0 to 1)", "Costs")
        if w_memory > 1:
            raise ValueError(
                f"Costs needs w_memory, the share of a micro-batch's activations its W still "
                f"holds after its I, from 0 to 1, got {w_memory:g}"
            )
        object.__setattr__(self, "w_memory", w_memory)
        if self.B is None and (self.I is None) != (self.W is None):
            raise ValueError("give both I and W (B defaults to their sum), or give B")
        for name in ("contention", "overlap_send"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"Costs needs {name} to be True or False, got {shown(getattr(self, name))}"
                )
        if self.topology is not None:
            if not isinstance(self.topology, Topology):
                raise ValueError(
                    f"Costs needs topology to be a ppbook.links.Topology, got "
                    f"{type(self.topology).__name__}"
                )
            if self.comm or self.bandwidth is not None:
                raise ValueError(
                    "with a topology, its links give the latency and the bandwidth: leave "
                    f"comm and bandwidth unset (got comm={self.comm:g}, "
                    f"bandwidth={self.bandwidth})"
                )
            if self.comm_bytes and all(link.bandwidth is None for link in self.topology.links):
                raise ValueError(
                    "comm_bytes needs a bandwidth (bytes per time unit) on the topology's links "
                    "to turn into time"
                )

    @property
    def transfer(self) -> float:
        """Time of one point-to-point transfer between ranks on an idle link.

        ``comm + comm_bytes / bandwidth``; with a topology, the time on its slowest link.
        """
        if self.topology is not None:
            return max(link.time(self.comm_bytes) for link in self.topology.links)
        extra = self.comm_bytes / self.bandwidth if self.bandwidth else 0.0
        return finite_result(self.comm + extra, "the transfer time comm + comm_bytes / bandwidth")

    @property
    def per_link(self) -> bool:
        """Whether the simulator must time each transfer on its link (not the plain default).

        True with a topology, with contention, or when sends do not overlap compute.
        """
        return self.topology is not None or self.contention or not self.overlap_send

    @property
    def device_model(self) -> bool:
        """Whether the simulator must time ranks on their devices
        (:mod:`ppbook.shared_device`): copies occupy the ranks, or ranks share a device."""
        sharing = self.topology is not None and self.topology.ranks_per_device > 1
        return bool(self.send_copy or self.recv_copy or self.input_copy or sharing)

    def link(self, sender: int, receiver: int) -> Link:
        """The link from rank ``sender`` to rank ``receiver``: the topology's, or one link
        of latency ``comm`` and ``bandwidth`` between every pair of ranks."""
        if self.topology is not None:
            return self.topology.link(sender, receiver)
        return Link(latency=self.comm, bandwidth=self.bandwidth)

    def per_stage(self, num_stages: int, share: float = 1.0) -> dict[str, list[float] | None]:
        """Resolve defaults: ``{"F": [...], "B": [...], "I": [...], "W": [...], "FB": None}``.

        One value per stage: the time of one pass of one micro-batch through that stage.
        ``share`` is the part of one device's share of the model that a stage holds
        (:attr:`ppbook.pipeline_schedule.Schedule.chunk_share`, 1/v with v chunks per rank): every
        compute cost is multiplied by it. ``FB`` is a list only when given (otherwise a
        pair costs ``F + B`` of its stages).
        """
        share = as_quantity(
            share, "share (of one device's part of the model)", "per_stage", inclusive=False
        )
        f = _expand("F", self.F, num_stages)
        if self.B is not None:
            b = _expand("B", self.B, num_stages)
            i = _expand("I", self.I, num_stages) if self.I is not None else None
            w = _expand("W", self.W, num_stages) if self.W is not None else None
            if i is None and w is None:
                i = [x / 2 for x in b]
                w = [x / 2 for x in b]
            elif i is None:
                i = [_left("I", bb - ww) for bb, ww in zip(b, w, strict=True)]
            elif w is None:
                w = [_left("W", bb - ii) for bb, ii in zip(b, i, strict=True)]
        elif self.I is not None:
            i = _expand("I", self.I, num_stages)
            w = _expand("W", self.W, num_stages)
            b = [ii + ww for ii, ww in zip(i, w, strict=True)]
        else:
            b = [2 * x for x in f]
            i = [x / 2 for x in b]
            w = [x / 2 for x in b]
        fb = _expand("FB", self.FB, num_stages) if self.FB is not None else None
        resolved = {"F": f, "B": b, "I": i, "W": w, "FB": fb}
        for key, values in resolved.items():
            if values is not None:
                resolved[key] = [finite_result(x * share, f"cost {key}") for x in values]
        return resolved

    def activation_bytes_per_stage(self, num_stages: int, share: float = 1.0) -> list[float] | None:
        """Bytes one micro-batch's activations take on each stage, if given.

        ``activation_bytes`` is for one device's share of the model; a stage holding
        ``share`` of it (:attr:`ppbook.pipeline_schedule.Schedule.chunk_share`) holds that part.
        """
        if self.activation_bytes is None:
            return None
        share = as_quantity(
            share,
            "share (of one device's part of the model)",
            "activation_bytes_per_stage",
            inclusive=False,
        )
        values = _expand("activation_bytes", self.activation_bytes, num_stages)
        return [x * share for x in values]

    @classmethod
    def parse(cls, text: str, **kwargs) -> Costs:
        """Parse the command line's ``F=1,B=2`` (keys F, B, I, W, FB, each at most once)."""
        values: dict[str, float] = {}
        for item in filter(None, (s.strip() for s in text.split(","))):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in KEYS:
                raise ValueError(
                    f"cannot read cost {shown(item)}: expected KEY=VALUE with KEY one of "
                    + ", ".join(KEYS)
                )
            if key in values:
                raise ValueError(f"cost {key} is given twice in {shown(text)}: give each key once")
            try:
                number = float(value)
            except ValueError:
                raise ValueError(
                    f"cost {key} must be a number, got {shown(value.strip())}"
                ) from None
            values[key] = as_quantity(number, f"cost {key}")
        return cls(**values, **kwargs)


def _as_cost(name: str, value: object) -> float | tuple[float, ...]:
    """A number, or one number per stage, checked by :func:`ppbook.checks.as_quantity`."""
    if is_real(value):
        return as_quantity(value, name, "Costs")
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise ValueError(
            f"Costs needs {name} to be a number or a list of numbers (one per stage), "
            f"got {shown(value)} ({type(value).__name__})"
        )
    value = tuple(value)
    if all(type(x) is float and 0.0 <= x <= _LARGEST for x in value):  # already fine, fast
        return value
    return tuple(as_quantity(x, f"{name}[{s}]", "Costs") for s, x in enumerate(value))


_LARGEST = sys.float_info.max  # NaN and infinity fail 0 <= x <= _LARGEST


def _expand(name: str, value: float | tuple[float, ...], num_stages: int) -> list[float]:
    if isinstance(value, float):
        return [value] * num_stages
    if len(value) != num_stages:
        raise ValueError(
            f"cost {name} has {len(value)} values, but the schedule has {num_stages} stages: "
            "give one value per stage or a single number"
        )
    return list(value)


def _left(name: str, value: float) -> float:
    if value < 0:
        raise ValueError(f"cost {name} would be negative ({value:g}): I + W must not exceed B")
    return value
