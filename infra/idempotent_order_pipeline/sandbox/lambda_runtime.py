"""Run the deployed function the way a Lambda execution environment does, in a process of its own.

:class:`FunctionProcess` (used by the poller) starts this file as a script, on the interpreter its
runtime's :class:`~.runtimes.RuntimeChoice` names (python3.14 for a ``python3.14`` function, when
this machine has one)::

    python -S -P lambda_runtime.py --task DIR [--layer DIR ...] --site-packages SDK_DIR --handler H

The child sees what a Lambda sandbox sees and nothing of the repository: ``sys.path`` is the
function's code directory (``/var/task``), then its layers (``/opt/python``), then the standard
library and, last, the SDK directory (:func:`~.runtimes.build_sdk`: boto3 and its requirements,
which Lambda's runtime provides, and nothing else of the stand-in's environment); ``-S`` skips
site-packages and ``.pth`` files, so the repository's editable install cannot supply a module the
asset lacks. Its environment is the function's configured variables plus the reserved ones Lambda sets,
with the AWS endpoint and dummy credentials of the sandbox. It imports the handler string at
start (a cold start), reports ``Runtime.ImportModuleError`` or ``Runtime.HandlerNotFound`` as Lambda
does, then serves invocations one at a time.

Protocol (JSON lines): the parent writes ``{"event", "deadline_ms", "request_id", "crash"}`` to the
child's stdin; the child answers on its original stdout, and everything the function prints
(Powertools' JSON logs and EMF metrics) goes to stderr, which the parent sends to a log file - the
sandbox's CloudWatch Logs. The child exits when its stdin closes.

Crash injection (the chaos part): ``crash`` is ``{"at_call": n, "after": bool}`` or null. The child
counts the AWS calls the handler makes through any botocore client (``BaseClient._make_api_call``,
however the handler builds its clients) and, at the n-th call, raises :class:`InjectedCrash`
before the request is sent or after its response arrived. ``InjectedCrash`` derives from
``BaseException``: the pipeline catches ``Exception`` per record, so this one goes through it
and kills the invocation, like a process crash or a timeout would, and SQS redelivers the whole
batch.

Only the standard library may be imported at module level: the child starts with a bare path.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from idempotent_order_pipeline.sandbox.function import DeployedFunction
    from idempotent_order_pipeline.sandbox.runtimes import FunctionRuntime
    from idempotent_order_pipeline.sandbox.server import Endpoint

#: Lambda's limit for the init phase (import of the handler module).
INIT_TIMEOUT_SECONDS = 10.0
#: Extra time the parent waits past the function's timeout before it kills the process.
TIMEOUT_GRACE_SECONDS = 1.0


class InjectedCrash(BaseException):
    """The execution environment dies here (chaos); the handler cannot catch it."""


# --- parent side ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CrashOrder:
    """Crash the invocation at its ``at_call``-th AWS call, before it is sent or after it returned."""

    at_call: int
    after: bool


@dataclass(frozen=True)
class FunctionError:
    """An invocation that did not return: what Lambda would report as a function error."""

    error_type: str
    message: str
    injected: bool = False


@dataclass(frozen=True)
class Invocation:
    """The outcome of one invocation."""

    payload: Any = None
    error: FunctionError | None = None
    aws_calls: int = 0
    duration_ms: float = 0.0
    cold_start: bool = False


def lambda_environment(function: DeployedFunction, endpoint: Endpoint, task_dir: Path) -> dict[str, str]:
    """The function's variables, then what Lambda reserves, then the sandbox's endpoint.

    Less the SDK's service-specific endpoint variables (``AWS_ENDPOINT_URL_SQS``, ...): they name VPC
    endpoints the pipeline made (``create_vpc_endpoints``), which the stand-in has no network for; its
    one endpoint (``AWS_ENDPOINT_URL``) serves every service, and a service-specific variable would win
    over it.
    """
    from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import ENDPOINT_URL_VARIABLE_PREFIX

    return {
        **{
            name: value
            for name, value in function.environment.items()
            if not name.startswith(ENDPOINT_URL_VARIABLE_PREFIX)
        },
        "AWS_LAMBDA_FUNCTION_NAME": function.name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function.name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": f"sandbox/{uuid.uuid4().hex}",
        "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.runtime}",
        "LAMBDA_TASK_ROOT": str(task_dir),
        "_HANDLER": function.handler,
        "TZ": ":UTC",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONDONTWRITEBYTECODE": "1",
        **endpoint.environment(),
    }


class FunctionProcess:
    """One execution environment of the deployed function: a child process, one invocation at a time.

    Like Lambda, it is started lazily (cold start) and replaced after a timeout; an invocation that
    raises leaves it running.
    """

    def __init__(
        self,
        function: DeployedFunction,
        endpoint: Endpoint,
        task_dir: Path,
        layer_dirs: Sequence[Path],
        log_path: Path,
        runtime: FunctionRuntime,
    ) -> None:
        self.function = function
        #: The interpreter it runs on and the SDK beside it (:class:`~.runtimes.Runtimes`).
        self.runtime = runtime
        self._endpoint = endpoint
        self._task_dir = task_dir
        self._layer_dirs = list(layer_dirs)
        self._log_path = log_path
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._init_error: FunctionError | None = None
        #: Top-level modules of the last cold start and the file each came from (None: built in).
        self.loaded_modules: dict[str, str | None] = {}

    def _start(self) -> None:
        script = Path(__file__).resolve()
        sdk_dir = self.runtime.sdk_dir
        interpreter = self.runtime.choice.interpreter
        visible = [script.parent, self._task_dir, *self._layer_dirs, sdk_dir]
        command = interpreter.command(visible, cwd=self._task_dir)
        # -P (3.11+) keeps the script's directory off sys.path; on 3.10 the child takes it off itself.
        command += ["-S", *(["-P"] if interpreter.version >= (3, 11) else []), str(script)]
        command += ["--task", str(self._task_dir), "--handler", self.function.handler]
        for layer_dir in self._layer_dirs:
            command += ["--layer", str(layer_dir)]
        command += ["--site-packages", str(sdk_dir)]
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("a") as log:
            self._process = subprocess.Popen(  # noqa: S603 - our interpreter, our script
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=lambda_environment(self.function, self._endpoint, self._task_dir),
                cwd=self._task_dir,
            )
        self._lines = queue.Queue()
        stdout = self._process.stdout
        assert stdout is not None
        threading.Thread(target=_pump, args=(stdout, self._lines), name="function-stdout", daemon=True).start()
        ready = self._read(INIT_TIMEOUT_SECONDS)
        if ready is None:
            self._kill()
            self._init_error = FunctionError("Runtime.InitTimeout", f"no init within {INIT_TIMEOUT_SECONDS:.0f} s")
        else:
            self.loaded_modules = dict(ready.get("modules") or {})
            error = ready.get("init_error")
            self._init_error = None if error is None else FunctionError(error["errorType"], error["errorMessage"])

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return None if self._process is None else self._process.pid

    def _read(self, timeout: float) -> dict[str, Any] | None:
        try:
            line = self._lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None
        return None if line is None else dict(json.loads(line))

    def invoke(self, event: Mapping[str, Any], crash: CrashOrder | None = None) -> Invocation:
        """Invoke the function with ``event``; a timeout kills the process (the next call starts one)."""
        cold = self._process is None or self._process.poll() is not None
        if cold:
            self._start()
        if self._init_error is not None:
            error = self._init_error
            if self._process is not None and self._process.poll() is not None:
                self._process = None
            return Invocation(error=error, cold_start=cold)
        assert self._process is not None
        assert self._process.stdin is not None
        started = time.monotonic()
        timeout = float(self.function.timeout_seconds)
        request = {
            "event": event,
            "deadline_ms": int((time.time() + timeout) * 1000),
            "request_id": str(uuid.uuid4()),
            "crash": None if crash is None else {"at_call": crash.at_call, "after": crash.after},
        }
        try:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
        except BrokenPipeError:
            self._kill()
            return Invocation(error=FunctionError("Runtime.ExitError", "the runtime process exited"), cold_start=cold)
        response = self._read(timeout + TIMEOUT_GRACE_SECONDS)
        duration_ms = (time.monotonic() - started) * 1000
        if response is None:
            exited = self._process.poll() is not None
            self._kill()
            died = (
                FunctionError("Runtime.ExitError", "the runtime process exited")
                if exited
                else FunctionError("Sandbox.Timedout", f"Task timed out after {timeout:.2f} seconds")
            )
            return Invocation(error=died, duration_ms=duration_ms, cold_start=cold)
        reported = response.get("error")
        return Invocation(
            payload=response.get("result"),
            error=None
            if reported is None
            else FunctionError(reported["errorType"], reported["errorMessage"], bool(reported.get("injected"))),
            aws_calls=int(response.get("aws_calls", 0)),
            duration_ms=duration_ms,
            cold_start=cold,
        )

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def stop(self) -> None:
        """Close the child's stdin (it exits), wait a little, kill it if needed."""
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)
        self._kill()


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


# --- child side ----------------------------------------------------------------------------------


class _Context:
    """The Lambda context object the handler receives."""

    def __init__(self, deadline_ms: int, request_id: str) -> None:
        self._deadline_ms = deadline_ms
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        region = os.environ.get("AWS_REGION", "")
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{self.function_name}"
        self.aws_request_id = request_id
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


class _CrashInjector:
    """Counts AWS calls made through boto3's default session; raises InjectedCrash when armed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self._order: dict[str, Any] | None = None

    def arm(self, order: dict[str, Any] | None) -> None:
        """Start counting an invocation's calls; crash as ``order`` says (None: never)."""
        with self._lock:
            self.calls = 0
            self._order = order

    def disarm(self) -> None:
        with self._lock:
            self._order = None

    def _fire(self, number: int, after: bool) -> bool:
        with self._lock:
            order = self._order
            if order is None or bool(order["after"]) != after or number != int(order["at_call"]):
                return False
            self._order = None
            return True

    def before_call(self) -> int:
        """Count a call about to be sent and return its number; crash here if armed for it."""
        with self._lock:
            self.calls += 1
            number = self.calls
        if self._fire(number, after=False):
            raise InjectedCrash("injected crash before an AWS call was sent")
        return number

    def after_call(self, number: int) -> None:
        """Crash after call ``number`` returned, if armed for it.

        By the call's own number, not the count so far: the consumer makes calls from several
        threads at once, so by the time call 1 returns, calls 2 to 9 may have been sent.
        """
        if self._fire(number, after=True):
            raise InjectedCrash("injected crash after an AWS call returned")

    def counting(self, make_api_call: Callable[..., Any]) -> Callable[..., Any]:
        """``make_api_call`` (botocore's ``BaseClient._make_api_call``) with every call counted.

        A crash armed for after a call fires once its answer has arrived, whether the answer is a
        result or an error (a cancelled transaction, a throttle): a batch of redelivered records
        makes one call, and AWS answers it with an error.
        """

        def counted_api_call(client: Any, operation_name: str, api_params: Any) -> Any:
            number = self.before_call()
            try:
                return make_api_call(client, operation_name, api_params)
            finally:
                self.after_call(number)

        return counted_api_call


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "errorType": type(exc).__name__,
        "errorMessage": str(exc),
        "injected": isinstance(exc, InjectedCrash),
        "stackTrace": traceback.format_exception(exc)[-8:],
    }


def _load_handler(handler: str) -> tuple[Callable[..., Any] | None, dict[str, str] | None]:
    module_name, _, function_name = handler.rpartition(".")
    if not module_name or not function_name:
        return None, {"errorType": "Runtime.MalformedHandlerName", "errorMessage": f"Bad handler '{handler}'"}
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # what Lambda reports for any failure to import the module
        return None, {
            "errorType": "Runtime.ImportModuleError",
            "errorMessage": f"Unable to import module '{module_name}': {exc}",
        }
    entry = getattr(module, function_name, None)
    if not callable(entry):
        return None, {
            "errorType": "Runtime.HandlerNotFound",
            "errorMessage": f"Handler '{function_name}' missing on module '{module_name}'",
        }
    return entry, None


def _child_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", required=True)
    parser.add_argument("--handler", required=True)
    parser.add_argument("--layer", action="append", default=[])
    parser.add_argument("--site-packages", action="append", default=[])
    args = parser.parse_args(argv)

    # Ctrl-C reaches the whole process group; the parent stops us by closing our stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Our answers go to the original stdout; whatever the function prints goes to stderr (the log).
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [path for path in sys.path if os.path.abspath(path or ".") != here]
    sys.path[:0] = [args.task, *args.layer]
    sys.path.extend(args.site_packages)

    import botocore.client

    injector = _CrashInjector()
    # Every client's calls, however the handler builds its clients (boto3's default session or its
    # own botocore session): BaseClient._make_api_call is where each one goes out.
    botocore.client.BaseClient._make_api_call = injector.counting(  # type: ignore[attr-defined]
        botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]
    )

    entry, init_error = _load_handler(args.handler)
    # Where the handler's package was imported from: the asset, or else something is miswired.
    loaded = {name: getattr(module, "__file__", None) for name, module in sys.modules.items() if "." not in name}
    ready = {"ready": init_error is None, "init_error": init_error, "modules": loaded}
    protocol.write(json.dumps(ready) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        injector.arm(request.get("crash"))
        response: dict[str, Any]
        try:
            if entry is None:
                response = {"error": init_error}
            else:
                result = entry(request["event"], _Context(request["deadline_ms"], request["request_id"]))
                response = {"result": result}
        except BaseException as exc:  # the runtime reports every way an invocation can die
            response = {"error": _error(exc)}
        finally:
            injector.disarm()
            sys.stdout.flush()
            sys.stderr.flush()
        response["aws_calls"] = injector.calls
        protocol.write(json.dumps(response, default=str) + "\n")


if __name__ == "__main__":
    _child_main(sys.argv[1:])
