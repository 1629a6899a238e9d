"""The sandbox endpoint: a moto server on ``localhost`` that lets one request at a time into moto."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from moto.dynamodb.models import DynamoDBBackend

from idempotent_order_pipeline.sandbox import moto_patches
from idempotent_order_pipeline.sandbox.server import Endpoint, SandboxServer, SandboxServerProcess, restore_moto


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = SandboxServer()
    try:
        yield server.start()
    finally:
        server.stop()
        restore_moto()


def test_endpoint_is_named_localhost_and_applies_the_moto_fixes(endpoint: Endpoint) -> None:
    # GIVEN a running sandbox server
    # THEN its URL names localhost (moto's CloudFormation resolves template URLs by that name)
    assert endpoint.url.startswith("http://localhost:")
    # AND the transaction fix is in effect, and the endpoint answers
    assert moto_patches.is_applied()
    assert endpoint.client("dynamodb").list_tables()["TableNames"] == []


def test_requests_reach_moto_one_at_a_time(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a moto operation that records how many requests are inside it at once
    inside, most = 0, 0
    lock = threading.Lock()
    real = DynamoDBBackend.list_tables

    def slow_list_tables(self: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.05)
        with lock:
            inside -= 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "list_tables", slow_list_tables)
    # WHEN eight clients call it at the same time
    clients = [endpoint.client("dynamodb") for _ in range(8)]
    threads = [threading.Thread(target=client.list_tables) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # THEN moto saw them one after the other
    assert most == 1


def test_a_waiting_long_poll_does_not_block_other_requests(endpoint: Endpoint) -> None:
    # GIVEN a long poll waiting on an empty queue
    sqs = endpoint.client("sqs")
    url = sqs.create_queue(QueueName="long-poll")["QueueUrl"]
    received: list[Any] = []
    poll = threading.Thread(
        target=lambda: received.extend(
            endpoint.client("sqs").receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
        )
    )
    poll.start()
    time.sleep(0.5)
    # WHEN another client sends a message meanwhile
    started = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    sent_after = time.monotonic() - started
    poll.join(10)
    # THEN the send was not held up by the waiting poll, and the poll got the message
    assert sent_after < 2.5
    assert [message["Body"] for message in received] == ["hello"]


@pytest.mark.slow
def test_child_server_stops_with_its_context() -> None:
    # GIVEN a server in a child process
    server = SandboxServerProcess()
    with server as endpoint:
        pid = server.pid
        assert endpoint.client("sqs").list_queues().get("QueueUrls", []) == []
    # THEN leaving the context ended the child
    assert pid is not None
    assert server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
