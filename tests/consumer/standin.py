"""A stand-in AWS endpoint on localhost (real HTTP) that answers, never answers, or trickles, per call kind.

It speaks just enough DynamoDB (JSON 1.0), SNS (query/XML) and SQS (JSON 1.0) for the consumer's
first-delivery path: a record's ``TransactWriteItems`` (two Puts) succeeds, ``PublishBatch``
accepts every entry, the sent marks (``BatchExecuteStatement``) succeed. Each kind of call
(:data:`KINDS`) can be set to :data:`ANSWER`, :data:`HANG` (read the request, never answer) or
:data:`TRICKLE` (send the headers, then one byte of the body every :data:`TRICKLE_INTERVAL_S`, so
a read timeout never fires). It records the event ids it accepted per kind.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from tests.consumer.harness import statement_event_id

KINDS = ("record", "publish", "mark", "park")
ANSWER, HANG, TRICKLE = "answer", "hang", "trickle"
TRICKLE_INTERVAL_S = 0.25


class StandIn(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, latency_s: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.latency_s = latency_s
        self.behaviour = dict.fromkeys(KINDS, ANSWER)
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.accepted: dict[str, list[str]] = {kind: [] for kind in KINDS}
        self.received: dict[str, int] = dict.fromkeys(KINDS, 0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: StandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        target = self.headers.get("X-Amz-Target", "")
        kind, events, payload, content_type = self._answer(target, body)
        with self.server.lock:
            self.server.received[kind] += 1
        behaviour = self.server.behaviour[kind]
        if behaviour == HANG:
            self.server.stopping.wait()
            self.close_connection = True
            return
        if self.server.latency_s:
            time.sleep(self.server.latency_s)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        if behaviour == TRICKLE:
            self.send_header("Content-Length", str(len(payload) + 1_000_000))
            self.end_headers()
            while not self.server.stopping.wait(TRICKLE_INTERVAL_S):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    break
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        with self.server.lock:
            self.server.accepted[kind].extend(events)

    @staticmethod
    def _answer(target: str, body: bytes) -> tuple[str, list[str], bytes, str]:
        """(kind, event ids, response body, content type) for a request."""
        if target.startswith("DynamoDB"):
            request = json.loads(body)
            if target.endswith(".BatchExecuteStatement"):  # sent marks, one statement each
                events = [statement_event_id(statement) for statement in request["Statements"]]
                answer = {"Responses": [{"TableName": "processed-events"} for _ in events]}
                return "mark", events, json.dumps(answer).encode(), "application/x-amz-json-1.0"
            if target.endswith(".UpdateItem"):  # a sent mark (earlier versions)
                return "mark", [request["Key"]["event_id"]["S"]], b"{}", "application/x-amz-json-1.0"
            items = request.get("TransactItems", [])
            if items and "Update" in items[0]:  # sent marks in one transaction (earlier versions)
                events = [item["Update"]["Key"]["event_id"]["S"] for item in items]
                return "mark", events, b"{}", "application/x-amz-json-1.0"
            events = [items[0]["Put"]["Item"]["event_id"]["S"]] if items else []
            return "record", events, b"{}", "application/x-amz-json-1.0"
        if target.startswith("AmazonSQS"):
            request = json.loads(body)
            entries = request.get("Entries", [request])
            successful = [
                {"Id": e.get("Id", "0"), "MessageId": str(uuid.uuid4()), "MD5OfMessageBody": ""} for e in entries
            ]
            answer = {"Successful": successful, "Failed": []} if "Entries" in request else successful[0]
            return "park", [], json.dumps(answer).encode(), "application/x-amz-json-1.0"
        form = parse_qs(body.decode())
        if form.get("Action") == ["Publish"]:  # a single publish (earlier versions of the consumer)
            xml = (
                '<PublishResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishResult>'
                f"<MessageId>{uuid.uuid4()}</MessageId></PublishResult></PublishResponse>"
            )
            return "publish", [json.loads(form["Message"][0])["event_id"]], xml.encode(), "text/xml"
        members = sorted(
            {key.split(".")[2] for key in form if key.startswith("PublishBatchRequestEntries.member.")}, key=int
        )
        events, successful = [], []
        for member in members:
            entry_id = form[f"PublishBatchRequestEntries.member.{member}.Id"][0]
            message = json.loads(form[f"PublishBatchRequestEntries.member.{member}.Message"][0])
            events.append(message["event_id"])
            successful.append(f"<member><Id>{entry_id}</Id><MessageId>{uuid.uuid4()}</MessageId></member>")
        xml = (
            '<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishBatchResult>'
            f"<Successful>{''.join(successful)}</Successful><Failed/></PublishBatchResult>"
            f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></PublishBatchResponse>"
        )
        return "publish", events, xml.encode(), "text/xml"


@contextmanager
def running(latency_s: float = 0.0) -> Iterator[StandIn]:
    """A stand-in serving on a background thread; stopped (and every hung answer released) on exit."""
    server = StandIn(latency_s)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
