"""The minimal torch.distributed pipeline runtime (chapter 3; the only layer that imports torch).

It executes the schedule objects of :mod:`ppbook.schedules`, action by action, on real
processes, and measures itself into the simulator's :class:`~ppbook.timeline.Timeline`.
Importing this package imports nothing heavy; import the module you need:

- :mod:`~ppbook.runtime.config`: :class:`RunConfig` (what to run) and :func:`check`, the
  bottom of the runtime: every other module may import it, it imports none of them;
- :mod:`~ppbook.runtime.launch`: :func:`launch`, :func:`launch_many`, :class:`PipelineError`,
  :class:`Interrupted` (SIGINT, SIGTERM or SIGHUP: every rank stopped, nothing left);
- :mod:`~ppbook.runtime.preflight`: what the machine and the launching script must allow
  (cores, memory, the ``if __name__ == "__main__":`` guard), checked before processes start;
- :mod:`~ppbook.runtime.result`: :class:`RunResult` (timelines, loss, gradients);
- :mod:`~ppbook.runtime.reference`: the same model in one process, and the comparison;
- :mod:`~ppbook.runtime.measure`: measured costs, and measured against simulated;
- :mod:`~ppbook.runtime.torch_import`: :func:`from_pytorch`, PyTorch's schedule classes as
  ppbook schedules (no processes);
- :mod:`~ppbook.runtime.torch_engine`: ``engine="torch"``, a schedule run on PyTorch's engine;
- :mod:`~ppbook.runtime.devices`: :func:`choose_mode` (NCCL, a shared GPU, or CPU, and why)
  and the clock checks of a run (chapter 9);
- :mod:`~ppbook.runtime.recording`: runs recorded with their hardware, versions and command
  (``make gpu-demo``, ``data/gpu_demo/``), and read back;
- :mod:`~ppbook.cli.run`: ``ppbook run``.

Inside a rank: :mod:`~ppbook.runtime.context` (process group, devices, loopback),
:mod:`~ppbook.runtime.plan` (which messages go where), :mod:`~ppbook.runtime.comm`
(messages with identities), :mod:`~ppbook.runtime.stage` (F, B, I, W of one stage),
:mod:`~ppbook.runtime.execute` (the loop over a rank's actions), :mod:`~ppbook.runtime.clock`
(timing and clock alignment), :mod:`~ppbook.runtime.models` (example models, cutting a model
into parts) and :mod:`~ppbook.runtime.worker` (what each process runs).
:mod:`~ppbook.runtime.examples` serves chapter 3 (its exercises: :mod:`ppbook.exercises.ch3`).
"""
