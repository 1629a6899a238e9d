"""Start, inspect and stop the stand-in: what ``order-pipeline sandbox start|status|stop`` do.

The stand-in (:mod:`.standin`) runs in the background, in a session of its own, so that it
outlives the command that started it and a Ctrl-C in that terminal does not reach it. Everything
it needs and leaves is in its state directory (default ``./.order-pipeline-sandbox``, or
``$ORDER_PIPELINE_SANDBOX_DIR``):

=================  ====================================================================
``sandbox.env``    ``export`` lines: dummy credentials, ``AWS_ENDPOINT_URL``, region
``sandbox.log``    the stand-in's log: bootstrap, functions started, replaced, stopped
``state.json``     the stand-in's pid, endpoint and interpreters, written once it is ready
``status.json``    what runs now: mappings, schedules, invocation counts, problems
``logs/``          the endpoint's log and each function's output (its CloudWatch Logs)
=================  ====================================================================
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idempotent_order_pipeline.sandbox.checks import queue_depth
from idempotent_order_pipeline.sandbox.deploy import Layer
from idempotent_order_pipeline.sandbox.paths import python_path
from idempotent_order_pipeline.sandbox.server import Endpoint
from idempotent_order_pipeline.sandbox.supervisor import SupervisorOptions

#: The state directory when neither ``--state-dir`` nor the variable names one (relative to the cwd).
DEFAULT_STATE_DIR = Path(".order-pipeline-sandbox")
#: The variable that names the state directory.
STATE_DIR_VARIABLE = "ORDER_PIPELINE_SANDBOX_DIR"
#: How long ``start`` waits for the stand-in (the first ``cdk bootstrap`` starts Node and jsii).
DEFAULT_START_TIMEOUT_SECONDS = 600.0
#: How long ``stop`` waits before it kills the stand-in and everything it started.
STOP_TIMEOUT_SECONDS = 30.0


class StandInError(RuntimeError):
    """The stand-in did not start, or could not be stopped (the message says why and names the log)."""


@dataclass(frozen=True)
class StateDir:
    """The files of one stand-in."""

    path: Path

    @classmethod
    def resolve(cls, path: str | os.PathLike[str] | None = None) -> StateDir:
        """``path``, else ``$ORDER_PIPELINE_SANDBOX_DIR``, else :data:`DEFAULT_STATE_DIR`; made absolute."""
        chosen = path or os.environ.get(STATE_DIR_VARIABLE) or DEFAULT_STATE_DIR
        return cls(Path(chosen).expanduser().resolve())

    @property
    def env_file(self) -> Path:
        return self.path / "sandbox.env"

    @property
    def log_file(self) -> Path:
        return self.path / "sandbox.log"

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def status_file(self) -> Path:
        return self.path / "status.json"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"


@dataclass(frozen=True)
class Running:
    """A running stand-in, as its ``state.json`` describes it."""

    pid: int
    endpoint_url: str
    region: str
    state: StateDir
    #: The Powertools layer it published (its zip is what the functions' layer directory holds).
    layer: Layer
    #: For each of Lambda's Python runtimes, the interpreter that runs its functions
    #: (:meth:`.runtimes.RuntimeChoice.as_dict`; ``summary`` is what ``sandbox start`` prints).
    runtimes: tuple[dict[str, Any], ...] = ()

    def status(self) -> dict[str, Any]:
        """What runs now (the supervisor rewrites it every round); empty before its first round."""
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads(self.state.status_file.read_text()))
        return {}


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child that exited: reap it
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(state_dir: StateDir) -> Running | None:
    """The stand-in of ``state_dir`` if it runs (a state file whose process is gone does not count)."""
    try:
        state = json.loads(state_dir.state_file.read_text())
    except (OSError, ValueError):
        return None
    pid = int(state["pid"])
    if not _alive(pid):
        return None
    layer = Layer(
        arn=str(state["layer"]["arn"]), zip_path=Path(state["layer"]["zip"]), sha256=str(state["layer"]["sha256"])
    )
    return Running(
        pid=pid,
        endpoint_url=str(state["endpoint"]),
        region=str(state["region"]),
        state=state_dir,
        layer=layer,
        runtimes=tuple(dict(runtime) for runtime in state.get("runtimes", ())),
    )


@contextlib.contextmanager
def _locked(state_dir: StateDir) -> Iterator[None]:
    """One ``start`` or ``stop`` at a time per state directory."""
    state_dir.path.mkdir(parents=True, exist_ok=True)
    with (state_dir.path / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _log_tail(path: Path, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def start(
    state_dir: StateDir,
    *,
    options: SupervisorOptions | None = None,
    cdk: str | None = None,
    timeout: float = DEFAULT_START_TIMEOUT_SECONDS,
) -> tuple[Running, bool]:
    """Start the stand-in in the background and wait until it is ready.

    Returns it and whether it was started now (False: it was running already, left as it was).
    """
    options = options or SupervisorOptions()
    with _locked(state_dir):
        already = running(state_dir)
        if already is not None:
            return already, False
        for stale in (state_dir.state_file, state_dir.env_file, state_dir.status_file):
            stale.unlink(missing_ok=True)
        command = [
            sys.executable,
            "-m",
            "idempotent_order_pipeline.sandbox.standin",
            "--state-dir",
            str(state_dir.path),
        ]
        command += ["--concurrency", str(options.concurrency), "--visibility-timeout", str(options.visibility_timeout)]
        command += ["--crash-rate", str(options.crash_rate), "--seed", str(options.seed)]
        if cdk:
            command += ["--cdk", cdk]
        # No AWS_* setting of the caller reaches the stand-in: it is an account of its own.
        environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        with state_dir.log_file.open("a") as log:
            process = subprocess.Popen(  # noqa: S603 - our interpreter, our module
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**environment, "PYTHONPATH": python_path()},
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = running(state_dir)
            if ready is not None and ready.pid == process.pid:
                return ready, True
            if process.poll() is not None:
                raise StandInError(
                    f"the stand-in exited (code {process.returncode}) before it was ready; "
                    f"{state_dir.log_file} ends with:\n{_log_tail(state_dir.log_file)}"
                )
            time.sleep(0.25)
        _kill_group(process.pid)
        raise StandInError(
            f"the stand-in was not ready within {timeout:.0f} s and was stopped; "
            f"{state_dir.log_file} ends with:\n{_log_tail(state_dir.log_file)}"
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def stop(state_dir: StateDir, *, timeout: float = STOP_TIMEOUT_SECONDS) -> Running | None:
    """Stop the stand-in (SIGTERM, then SIGKILL of its session); returns what was stopped, None if nothing ran."""
    with _locked(state_dir):
        current = running(state_dir)
        if current is None:
            for stale in (state_dir.state_file, state_dir.env_file):
                stale.unlink(missing_ok=True)
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(current.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(current.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(current.pid):
            _kill_group(current.pid)
        # It removes them itself on a clean exit; not after a SIGKILL.
        for leftover in (state_dir.state_file, state_dir.env_file):
            leftover.unlink(missing_ok=True)
        return current


def wait_until_idle(stand_in: Running, *, timeout: float, settle_seconds: float = 2.0) -> bool:
    """Wait until every queue the stand-in polls is empty (nothing visible, nothing in flight) for
    ``settle_seconds``: what was sent is processed, and what that published was too. False on timeout."""
    sqs = Endpoint(url=stand_in.endpoint_url, region=stand_in.region).client("sqs")
    asked, deadline = time.time(), time.monotonic() + timeout
    idle_since: float | None = None
    while time.monotonic() < deadline:
        status = stand_in.status()
        # Only a round begun after this call has seen every mapping deployed before it.
        busy = status.get("round_started", 0) <= asked
        for mapping in status.get("mappings", []):
            busy = busy or any(queue_depth(sqs, mapping["queue"])) or bool(mapping["in_flight"])
        if busy:
            idle_since = None
        else:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= settle_seconds:
                return True
        time.sleep(0.25)
    return False
