"""Released versions' code, frozen as released, run in a child process.

Releases are named by commit (:data:`RELEASE_COMMITS`; CHANGELOG.md records the same), since tags do not
travel with the repository. ``tests/compat/v0_1_0/lambdas`` is ``git show <0.1.0's commit>:lambdas/...``,
kept as files. The released code imports itself as top-level packages
(``order_events``, ``order_consumer``), which this test process must never do (one import root,
see ``tests/conftest.py``), so it only ever runs in a child process.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from moto.server import ThreadedMotoServer

from tests.compat.released_worker import ANSWER

#: Each release's commit (the local tags v0.1.0 and v0.2.0 pointed there; they are not pushed).
RELEASE_COMMITS = {
    "0.1.0": "e6c98c4441270d419339736e7050e04964f99d28",
    "0.2.0": "8a1b99713d0253059de9c1747fc7f903e1fa0c90",
}
HERE = Path(__file__).resolve().parent
V0_1_0 = HERE / "v0_1_0" / "lambdas"
#: ``git show <0.2.0's commit>:infra/idempotent_order_pipeline/_lambda_asset/...``.
V0_2_0 = HERE / "v0_2_0" / "lambdas"
WORKER = HERE / "released_worker.py"


def run_released(root: Path, script: str, payload: Any) -> Any:
    """Run ``script`` with ``root`` first on the path; it reads JSON ``payload`` from stdin and prints JSON."""
    done = subprocess.run(  # noqa: S603 - this interpreter, frozen code of this repository
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(root)!r})\n{script}"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


V0_1_0_KEYS = """
import json, sys
from decimal import Decimal
from order_events.keys import derive_event_id, payload_sha256
orders = json.loads(sys.stdin.read(), parse_float=Decimal, parse_int=Decimal)
print(json.dumps([[derive_event_id(o), payload_sha256(o)] for o in orders]))
"""


def v0_1_0_keys(orders: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(event id 0.1.0 derived, payload fingerprint 0.1.0 stored) for each order."""
    return [(key, sha) for key, sha in run_released(V0_1_0, V0_1_0_KEYS, orders)]


@contextmanager
def moto_server(lock: AbstractContextManager[Any] | None = None) -> Iterator[str]:
    """This process's moto state served over HTTP (inside ``mock_aws``, the server shares its backends); the URL.

    ``lock``: held around each request, the lock the in-process clients hold around each call
    (``tests.consumer.harness.GuardedClient``): moto's ``transact_write_items`` copies whole tables and
    restores them on a cancellation, without a lock of its own, so a request served meanwhile by the
    server's thread would be undone, which real DynamoDB never does.
    """
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    if lock is not None:
        wsgi = server._server
        assert wsgi is not None
        wsgi.app = _serialized(wsgi.app, lock)
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def _serialized(app: Any, lock: AbstractContextManager[Any]) -> Any:
    def serve(environ: Any, start_response: Any) -> list[bytes]:
        with lock:
            return list(app(environ, start_response))

    return serve


class ReleasedFunctions:
    """A released version's consumer and reconciler entry points, in one child process, on this process's moto.

    Needs :func:`moto_server`'s URL; the environment is the functions' (tables, topic, DLQ, ttl).
    """

    def __init__(self, root: Path, endpoint_url: str, environ: Mapping[str, str]) -> None:
        self._process = subprocess.Popen(  # noqa: S603 - this interpreter, frozen code of this repository
            [sys.executable, "-I", str(WORKER), str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "AWS_ENDPOINT_URL": endpoint_url},
        )
        self._send(dict(environ))
        assert self._answer() == {"ready": True}

    def _send(self, payload: Any) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(payload) + "\n")
        self._process.stdin.flush()

    def _answer(self) -> Any:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith(ANSWER):
                return json.loads(line[len(ANSWER) :])
        raise AssertionError(f"the released functions' process ended (exit code {self._process.wait()})")

    def invoke(self, records: list[Mapping[str, Any]]) -> dict[str, Any]:
        """The released consumer's answer to an SQS batch (``{"error": ...}`` if the invocation failed)."""
        self._send({"entry": "handler", "event": {"Records": list(records)}})
        return dict(self._answer())

    def configure(self, environ: Mapping[str, str]) -> None:
        """Use this environment from the next invocation on (other tables, another topic)."""
        self._send({"entry": "configure", "event": dict(environ)})
        assert self._answer() == {"ready": True}

    def reconcile(self) -> dict[str, Any]:
        """One run of the released reconciler; its report."""
        self._send({"entry": "reconciler", "event": {}})
        return dict(self._answer())

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@contextmanager
def released_functions(
    root: Path, environ: Mapping[str, str], lock: AbstractContextManager[Any] | None = None
) -> Iterator[ReleasedFunctions]:
    """:class:`ReleasedFunctions` of the release under ``root`` on this process's moto (call inside ``mock_aws``);
    ``lock``: see :func:`moto_server`."""
    with moto_server(lock) as url:
        functions = ReleasedFunctions(root, url, environ)
        try:
            yield functions
        finally:
            functions.close()
