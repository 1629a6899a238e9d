"""The timing stand-in: AWS-shaped answers over real HTTP, a fixed latency after each request arrived.

Run in its own process (``python -m bench.http_standin``; it prints ``PORT <n>`` when it listens).
A threaded HTTP/1.1 server on 127.0.0.1: one thread per connection, so concurrent requests wait
their latency side by side and are never queued behind each other (moto's server does queue them:
it needs 3-4 ms of its own work per call under one lock). Every request is answered ``latency`` after
it arrived (the time it takes to read and answer it included), with a success response in the
service's wire format for the first-delivery path of the consumers:

* DynamoDB (JSON 1.0): ``TransactWriteItems``, ``PutItem``, ``UpdateItem``, ``DeleteItem``,
  ``BatchWriteItem`` (nothing unprocessed), ``BatchExecuteStatement`` and ``ExecuteStatement``
  (every statement succeeds), ``GetItem`` (no item);
* SNS (query protocol, XML): ``Publish``, ``PublishBatch`` (every entry accepted);
* SQS (JSON 1.0): ``SendMessage``, ``SendMessageBatch`` (every entry accepted, with the body's MD5).

Anything else is answered ``400 UnknownOperationException`` and counted, so a consumer that calls
something the stand-in does not know fails its records loudly instead of being timed on a fake.
The stand-in keeps no state: correctness is checked on moto in the same run (:mod:`bench.run`).

Control requests (``/__bench/...``, never delayed): ``POST /__bench/latency?ms=5`` sets the latency,
``GET /__bench/counts`` returns the calls per operation since the last ``POST /__bench/reset``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

SNS_NAMESPACE = "http://sns.amazonaws.com/doc/2010-03-31/"
CONTROL_PREFIX = "/__bench/"


class _State:
    """What every request thread shares: the latency and the call counts."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def count(self, operation: str) -> None:
        with self.lock:
            self.calls[operation] += 1


# --- responses -------------------------------------------------------------------------------------


def _dynamodb(operation: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if operation in ("TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "GetItem"):
        return 200, {}
    if operation == "BatchWriteItem":
        return 200, {"UnprocessedItems": {}}
    if operation == "BatchExecuteStatement":
        statements = request.get("Statements", [])
        return 200, {"Responses": [{"TableName": _partiql_table(s.get("Statement", ""))} for s in statements]}
    if operation == "ExecuteStatement":
        return 200, {"Items": []}
    return 400, {"__type": "UnknownOperationException", "message": f"the bench stand-in does not answer {operation}"}


def _partiql_table(statement: str) -> str:
    words = statement.replace('"', " ").split()
    for before, word in itertools.pairwise(words):
        if before.upper() in ("UPDATE", "INTO", "FROM"):
            return word
    return "table"


def _sqs(operation: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    def sent(body: str) -> dict[str, str]:
        return {"MessageId": str(uuid.uuid4()), "MD5OfMessageBody": hashlib.md5(body.encode()).hexdigest()}  # noqa: S324 - SQS's checksum

    if operation == "SendMessage":
        return 200, sent(request.get("MessageBody", ""))
    if operation == "SendMessageBatch":
        entries = request.get("Entries", [])
        return 200, {"Successful": [{"Id": e["Id"], **sent(e.get("MessageBody", ""))} for e in entries], "Failed": []}
    return 400, {"__type": "UnknownOperationException", "message": f"the bench stand-in does not answer {operation}"}


def _sns(operation: str, form: dict[str, list[str]]) -> tuple[int, str]:
    request_id = str(uuid.uuid4())
    metadata = f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
    if operation == "Publish":
        result = f"<PublishResult><MessageId>{uuid.uuid4()}</MessageId></PublishResult>"
    elif operation == "PublishBatch":
        ids = [
            v[0]
            for k, v in sorted(form.items())
            if k.startswith("PublishBatchRequestEntries.member.") and k.endswith(".Id")
        ]
        members = "".join(f"<member><Id>{i}</Id><MessageId>{uuid.uuid4()}</MessageId></member>" for i in ids)
        result = f"<PublishBatchResult><Successful>{members}</Successful><Failed/></PublishBatchResult>"
    else:
        error = (
            f'<ErrorResponse xmlns="{SNS_NAMESPACE}"><Error><Type>Sender</Type><Code>InvalidAction</Code>'
            f"<Message>the bench stand-in does not answer {operation}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        return 400, error
    return 200, f'<{operation}Response xmlns="{SNS_NAMESPACE}">{result}{metadata}</{operation}Response>'


# --- the server ------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as botocore's connection pool expects
    # One write per response, no Nagle: headers and body in separate segments would meet the
    # client's delayed ACK and add 40 ms to a call.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """No access log."""

    def do_GET(self) -> None:
        self._control()

    def do_POST(self) -> None:
        arrived = time.perf_counter()
        if self.path.startswith(CONTROL_PREFIX):
            self._control()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        target = self.headers.get("X-Amz-Target", "")
        state = self.server.state
        if target:  # JSON protocol: DynamoDB_20120810.Operation or AmazonSQS.Operation
            prefix, _, operation = target.partition(".")
            request = json.loads(body or b"{}")
            service = "dynamodb" if prefix.startswith("DynamoDB") else "sqs"
            status, payload = (_dynamodb if service == "dynamodb" else _sqs)(operation, request)
            content, content_type = json.dumps(payload).encode(), "application/x-amz-json-1.0"
        else:  # query protocol: SNS
            form = parse_qs(body.decode("utf-8"))
            operation = form.get("Action", [""])[0]
            status, text = _sns(operation, form)
            content, content_type = text.encode(), "text/xml"
        state.count(operation if status == 200 else f"unknown:{operation}")
        remaining = arrived + state.latency_s - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        self._send(status, content, content_type)

    def _control(self) -> None:
        url = urlsplit(self.path)
        state = self.server.state
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if url.path == CONTROL_PREFIX + "latency":
            state.latency_s = float(parse_qs(url.query)["ms"][0]) / 1000.0
            payload: dict[str, Any] = {"latency_ms": state.latency_s * 1000.0}
        elif url.path == CONTROL_PREFIX + "reset":
            with state.lock:
                state.calls.clear()
            payload = {}
        elif url.path == CONTROL_PREFIX + "counts":
            with state.lock:
                payload = dict(state.calls)
        else:
            self._send(404, b"{}", "application/json")
            return
        self._send(200, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, content: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(content)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(content)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, latency_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = _State(latency_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_standin", description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    server = _Server(args.latency_ms / 1000.0)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
