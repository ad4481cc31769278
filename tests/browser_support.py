"""The reader's JupyterLab for tests/test_browser.py: one server, one headless Chromium.

Both are started as processes of their own (their own process groups), so the test stops
them by process id even when it fails. The server serves a temporary copy of notebooks/
(JupyterLab's autosave never writes into the repository) with temporary workspace and
settings folders; Chromium runs with a fresh profile and is driven over the DevTools
protocol by Playwright from PyPI (never ``playwright install``: Debian's ``chromium``).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
STUDENT = "assignments/student"
"""Student copies of assignments are never opened: they raise NotImplementedError by design."""
WIDGET_IMPORT = "from ppbook.widgets"


def widget_notebooks() -> list[str]:
    """The start page and every notebook whose code builds a ppbook widget (relative paths)."""
    import json

    found = []
    for path in sorted(NOTEBOOKS.rglob("*.ipynb")):
        relative = path.relative_to(NOTEBOOKS).as_posix()
        if relative.startswith(STUDENT) or ".ipynb_checkpoints" in relative:
            continue
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if WIDGET_IMPORT in code or path.name.startswith("00_"):
            found.append(relative)
    return found


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Run in the child before it starts: SIGTERM when the test process dies, even killed
    (a killed pytest runs no finalizers). Linux only; elsewhere the finalizers do it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """End a process started in its own session, and everything in its group, by its id."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        except ProcessLookupError:
            pass
    else:  # the leader is gone; its children may not be
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class LabServer:
    """JupyterLab on 127.0.0.1 with a token, over a copy of notebooks/ in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root = folder / "notebooks"
        shutil.copytree(NOTEBOOKS, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.log = folder / "jupyterlab.log"
        env = dict(
            os.environ,
            JUPYTERLAB_WORKSPACES_DIR=str(folder / "workspaces"),
            JUPYTERLAB_SETTINGS_DIR=str(folder / "user-settings"),
            JUPYTER_RUNTIME_DIR=str(folder / "runtime"),
        )
        jupyter = Path(sys.executable).with_name("jupyter")
        command = [
            str(jupyter),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
        ]
        if os.geteuid() == 0:
            command.append("--allow-root")
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url(f"api/status?token={self.token}"), timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"JupyterLab not ready in {timeout} s: {self.log.read_text()[-2000:]}")

    def api(self, path: str, method: str = "GET") -> bytes:
        request = urllib.request.Request(
            self.url(f"api/{path}"),
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.read()

    def shut_down_kernels(self) -> None:
        """Free the CPU for the next notebook: end every running kernel."""
        import json

        for kernel in json.loads(self.api("kernels")):
            self.api(f"kernels/{kernel['id']}", method="DELETE")


class Chromium:
    """Headless Chromium with a fresh profile, its DevTools endpoint for Playwright."""

    ARGS = ("--headless", "--no-sandbox", "--disable-gpu")

    def __init__(self, executable: str, folder: Path) -> None:
        self.profile = folder / "chromium-profile"
        self.profile.mkdir()
        self.log = folder / "chromium.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [
                    executable,
                    *self.ARGS,
                    f"--user-data-dir={self.profile}",
                    "--remote-debugging-address=127.0.0.1",
                    "--remote-debugging-port=0",
                    "--no-first-run",
                    "--no-default-browser-check",
                    "about:blank",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def endpoint(self, timeout: float = 30) -> str:
        """The DevTools URL Chromium writes into its profile once it listens."""
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Chromium exited: {self.log.read_text()[-2000:]}")
            lines = port_file.read_text().split() if port_file.exists() else []
            if lines:
                return f"http://127.0.0.1:{lines[0]}"
            time.sleep(0.2)
        raise RuntimeError(f"Chromium not listening in {timeout} s: {self.log.read_text()[-2000:]}")
