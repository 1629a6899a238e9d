"""The local AWS endpoint: a moto server on ``localhost``, one request at a time, with the transact fix.

Why one request at a time: moto's backends are not thread-safe and the moto server answers each
request in its own thread. Its ``TransactWriteItems`` writes every item and undoes them on
cancellation as separate steps with no lock (see :mod:`.moto_patches`), so a concurrent request can
see the half-applied transaction or be undone by its rollback - something real DynamoDB, which is
linearizable per item, never does. :class:`SerializedApp` is a WSGI middleware that holds one lock
around each request, response body included. The one exception is a long poll: while an SQS
``ReceiveMessage`` waits for messages it holds no moto state, so it lets go of the lock for the wait
(otherwise a 20-second long poll would stall every other client).

Why ``localhost`` and not ``127.0.0.1``: moto's CloudFormation recognizes an S3 ``TemplateURL`` by
that host name (``cdk deploy`` passes one), and the endpoint URL must be the same name.

Two ways to run it, same behaviour:

* :class:`SandboxServer` - in a thread of this process (tests, benchmarks);
* :class:`SandboxServerProcess` - in a child process (``make demo``: moto then has a core of its
  own). The child exits when its stdin closes, so it cannot outlive its parent.

Both are context managers and expose an :class:`Endpoint`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.sqs.models import Queue
from werkzeug.serving import BaseWSGIServer, make_server

from idempotent_order_pipeline.sandbox import moto_cloudformation, moto_patches
from idempotent_order_pipeline.sandbox.paths import python_path

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

#: The host name of the endpoint (see the module docstring for why it must be this name).
HOST = "localhost"
#: The sandbox's fixed region and moto's default account.
REGION = "eu-west-1"
ACCOUNT = "123456789012"
#: Dummy credentials: moto accepts any, and nothing may ever reach a real account with them.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "sandbox", "AWS_SECRET_ACCESS_KEY": "sandbox"}
#: How long a child server may take to start listening.
START_TIMEOUT_SECONDS = 30.0
#: How long a child server gets to stop before it is killed.
STOP_TIMEOUT_SECONDS = 10.0
_READY_PREFIX = "order-pipeline-sandbox listening on "


@dataclass(frozen=True)
class Endpoint:
    """Where the local AWS endpoint listens, and how to talk to it."""

    url: str
    region: str = REGION

    def environment(self) -> dict[str, str]:
        """Variables that point the AWS SDKs and CLIs (Python, Node, ``aws``) at this endpoint."""
        return {
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": self.url,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            # Nothing from a developer's own AWS configuration may leak into the sandbox.
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def session(self) -> boto3.Session:
        """A boto3 session with the dummy credentials and the sandbox region."""
        return boto3.Session(
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=self.region,
        )

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for ``service`` at this endpoint."""
        return self.session().client(service, endpoint_url=self.url, **kwargs)  # type: ignore[call-overload]


class _SerialLock:
    """The one lock every request holds, and which thread holds it (for the long-poll release)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = threading.local()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            self._owner.holds = True
            try:
                yield
            finally:
                self._owner.holds = False

    @contextlib.contextmanager
    def released_while_waiting(self) -> Iterator[None]:
        """Let go of the lock for a wait that touches no moto state, if this thread holds it."""
        if not getattr(self._owner, "holds", False):
            yield
            return
        self._owner.holds = False
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()
            self._owner.holds = True


_serial = _SerialLock()
_original_wait_for_messages = Queue.wait_for_messages
_original_add_message = Queue.add_message


def _wait_for_messages(self: Queue, timeout: int) -> None:
    # Called by moto's receive_message between two scans of a queue that had nothing to deliver.
    with _serial.released_while_waiting():
        _original_wait_for_messages(self, timeout)


def _add_message_without_delivery(self: Queue, message: Any) -> None:
    # moto would run the queue's event source mappings here, in Docker, inside SendMessage; the
    # stand-in's supervisor polls the mappings instead (a request runs alone: see SerializedApp).
    mappings = self.lambda_event_source_mappings
    self.lambda_event_source_mappings = {}
    try:
        _original_add_message(self, message)
    finally:
        self.lambda_event_source_mappings = mappings


class SerializedApp:
    """WSGI middleware: moto handles one request at a time (see the module docstring)."""

    def __init__(self, app: WSGIApplication) -> None:
        self._app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        with _serial.held():
            result = self._app(environ, start_response)
            try:
                # The body is built inside the lock too: a lazy body would read moto state later.
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return [body]


def prepare_moto() -> None:
    """Apply the sandbox's moto fixes (idempotent): the patches module, the long-poll release, and
    no delivery by moto's own event source mappings (the stand-in's supervisor polls them)."""
    moto_patches.apply()
    Queue.wait_for_messages = _wait_for_messages  # type: ignore[method-assign]
    Queue.add_message = _add_message_without_delivery  # type: ignore[method-assign]


def restore_moto() -> None:
    """Undo :func:`prepare_moto` (for test suites that share a process with plain ``mock_aws``)."""
    moto_patches.revert()
    Queue.wait_for_messages = _original_wait_for_messages  # type: ignore[method-assign]
    Queue.add_message = _original_add_message  # type: ignore[method-assign]


def build_app() -> SerializedApp:
    """moto's server application (every service, dispatched by host and signature), serialized."""
    prepare_moto()
    return SerializedApp(DomainDispatcherApplication(create_backend_app))


class SandboxServer:
    """The endpoint in a daemon thread of this process. ``port=0`` picks a free port."""

    def __init__(self, port: int = 0, region: str = REGION) -> None:
        self._port = port
        self._region = region
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> Endpoint:
        if self._server is None:
            raise RuntimeError("the sandbox server is not running; call start() first")
        return Endpoint(url=f"http://{HOST}:{self._server.server_port}", region=self._region)

    def start(self) -> Endpoint:
        """Bind (on ``localhost``), serve in a thread, and return the endpoint."""
        self._server = make_server(HOST, self._port, build_app(), threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-server", daemon=True)
        self._thread.start()
        return self.endpoint

    def stop(self) -> None:
        """Stop serving and close the socket (moto's state stays in this process until reset)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=STOP_TIMEOUT_SECONDS)
        self._server = None
        self._thread = None

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class SandboxServerProcess:
    """The endpoint in a child process (``python -m idempotent_order_pipeline.sandbox.server``).

    The child binds a free port on ``localhost`` and prints it; it exits on SIGTERM, and when its
    stdin closes, so that it dies with this process even if this one is killed. It ignores SIGINT:
    a Ctrl-C reaches the whole process group, and the parent must stop its pollers first.
    """

    def __init__(self, region: str = REGION, log_path: str | os.PathLike[str] | None = None) -> None:
        self._region = region
        self._log_path = log_path
        self._process: subprocess.Popen[str] | None = None
        self._endpoint: Endpoint | None = None

    @property
    def endpoint(self) -> Endpoint:
        if self._endpoint is None:
            raise RuntimeError("the sandbox server is not running; call start() first")
        return self._endpoint

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> Endpoint:
        """Start the child and wait until it listens."""
        log = open(self._log_path, "a") if self._log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "idempotent_order_pipeline.sandbox.server", "--region", self._region],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONPATH": python_path()},
            )
        finally:
            if log is not subprocess.DEVNULL:
                log.close()  # type: ignore[union-attr]
        url = self._read_ready_line()
        self._endpoint = Endpoint(url=url, region=self._region)
        return self._endpoint

    def _read_ready_line(self) -> str:
        assert self._process is not None
        assert self._process.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self._process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(START_TIMEOUT_SECONDS)
        line = result[0] if result else ""
        if not line.startswith(_READY_PREFIX):
            self.stop()
            raise RuntimeError(
                f"the moto server did not start within {START_TIMEOUT_SECONDS:.0f} s"
                + (f" (see {self._log_path})" if self._log_path else "")
            )
        return line[len(_READY_PREFIX) :].strip()

    def stop(self) -> None:
        """Ask the child to stop, wait, kill it if it does not; never leaves it running."""
        process, self._process = self._process, None
        self._endpoint = None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def log_to_stderr() -> None:
    """What the stand-in's CloudFormation did beyond moto (rollbacks, skipped and refused resources)
    goes to stderr, which :class:`SandboxServerProcess` writes to its log file, beside moto's own lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    moto_cloudformation.LOGGER.addHandler(handler)
    moto_cloudformation.LOGGER.setLevel(logging.INFO)


def _serve(region: str) -> None:
    log_to_stderr()
    server = SandboxServer(region=region)
    endpoint = server.start()
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    # Ctrl-C in a terminal reaches the whole process group: the parent decides when to stop us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch_stdin(read: Callable[[], str] = sys.stdin.readline) -> None:
        while read():
            pass
        stop.set()  # EOF: the parent is gone

    threading.Thread(target=watch_stdin, name="parent-watch", daemon=True).start()
    print(_READY_PREFIX + endpoint.url, flush=True)
    stop.wait()
    server.stop()


def main(argv: list[str] | None = None) -> None:
    """``python -m idempotent_order_pipeline.sandbox.server``: serve until SIGTERM or stdin EOF (SIGINT is ignored)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--region", default=REGION)
    args = parser.parse_args(argv)
    _serve(args.region)


if __name__ == "__main__":
    main()
