"""The handler in processes of its own, for the kill-chaos test: ``python -m tests.reliability.kill_worker SOCKET``.

This process is a zygote: it imports ``order_consumer.handler`` and warms boto3's model cache once,
then forks one handler process per ``fork`` line read on stdin (so that a process killed by SIGKILL
is replaced in milliseconds, not after a fresh interpreter's second of imports). Nothing in the
zygote opens a connection or starts a thread before it forks; each child builds its own clients
at its first invocation, exactly as a Lambda execution environment does at a cold start, from the
environment variables the construct sets (the parent starts the zygote with them).

A child connects to the parent's Unix socket ``SOCKET``, sends ``{"pid": N}`` and then serves JSON
lines: an SQS event in, ``{"response": ...}`` (the handler's answer) or ``{"error": "..."}`` (it
raised) out, until the socket closes. The parent kills children with SIGKILL whenever it likes.
The zygote exits when its stdin closes (the parent is gone), so it cannot outlive the test.

Only the standard library and the handler's own imports are used.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import traceback
import uuid
from typing import Any


class _Context:
    """The slice of the Lambda context the handler and Powertools read."""

    function_name = "order-consumer"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:order-consumer"

    def __init__(self, timeout_ms: int) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _serve(socket_path: str, handler: Any) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    stream = connection.makefile("rwb")
    stream.write(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    stream.flush()
    for line in stream:
        request = json.loads(line)
        try:
            answer: dict[str, Any] = {"response": handler(request["event"], _Context(request["timeout_ms"]))}
        except Exception:
            answer = {"error": traceback.format_exc()}
        stream.write(json.dumps(answer).encode() + b"\n")
        stream.flush()


def main() -> None:
    socket_path = sys.argv[1]
    import boto3

    from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module

    for service in ("dynamodb", "sns", "sqs"):  # loads the service models into the default session's cache
        boto3.client(service)  # type: ignore[call-overload]
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed children are reaped by the kernel
    for line in sys.stdin:
        if line.strip() != "fork":
            continue
        if os.fork() == 0:
            code = 0
            try:
                _serve(socket_path, handler_module.handler)
            except BaseException:
                code = 1
            finally:
                os._exit(code)


if __name__ == "__main__":
    main()
