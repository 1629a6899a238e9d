"""A development stand-in for the Lambda SQS poller (the event source mapping). Not for production.

In AWS, Lambda's poller reads the queue and invokes the function; moto would do it in Docker, so
the endpoint leaves that out and the stand-in's supervisor runs this instead, one poller per
mapping, with the deployed mapping's settings:

1. receive up to ``batch_size`` messages (all attributes), with a visibility timeout, gathering
   for up to ``MaximumBatchingWindowInSeconds`` once the first message arrived;
2. build the SQS event Lambda sends (``Records[*]`` with ``messageId``, ``receiptHandle``,
   ``body``, ``attributes``, ``messageAttributes``, ``eventSourceARN``...) and invoke the function
   (:class:`~.lambda_runtime.FunctionProcess`);
3. if the invocation returned: delete every record, except, with ``ReportBatchItemFailures``, the
   ones it reported (an invalid report fails the whole batch, as in Lambda); if it failed (an
   exception, a crash, a timeout): delete nothing;
4. never touch what is left: it reappears when its visibility timeout ends, and the queue's own
   redrive policy moves a message to the DLQ once it was received ``maxReceiveCount`` times.

A FIFO queue keeps its group order by itself: SQS (and the endpoint) hands out no message of a
group while an earlier one of that group is in flight, so every worker may poll it.

Differences from the real poller, on purpose: a batch is received hidden for the function's
timeout (plus the runtime's grace), so that no other worker gets it while it runs, and whatever
failed is made visible again after ``visibility_timeout`` seconds (``ChangeMessageVisibility``): a
few seconds instead of the rest of the queue's 6x the function timeout, so that a rehearsal sees
redeliveries quickly. Concurrency is a fixed number of workers (one per
execution environment) instead of Lambda's scaling.
"""

from __future__ import annotations

import base64
import hashlib
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idempotent_order_pipeline.sandbox.checks import queue_depth
from idempotent_order_pipeline.sandbox.function import QueueMapping
from idempotent_order_pipeline.sandbox.lambda_runtime import (
    TIMEOUT_GRACE_SECONDS,
    CrashOrder,
    FunctionError,
    FunctionProcess,
    Invocation,
)
from idempotent_order_pipeline.sandbox.server import Endpoint

#: Default visibility timeout of a received batch, shortened from the queue's for the demo.
DEFAULT_VISIBILITY_TIMEOUT_SECONDS = 3
#: SQS returns at most this many messages per ReceiveMessage.
SQS_MAX_RECEIVE = 10
#: Long poll of each receive (the sandbox server lets other requests through while it waits).
RECEIVE_WAIT_SECONDS = 1

#: Asked before each invocation with the batch's records: where to crash it, or None.
CrashPlan = Callable[[Sequence[Mapping[str, Any]]], CrashOrder | None]


@dataclass
class PollerStats:
    """What the poller did (thread-safe updates through :meth:`PollerStats.add`)."""

    invocations: int = 0
    cold_starts: int = 0
    records_received: int = 0
    records_deleted: int = 0
    records_reported_failed: int = 0
    crashes_injected: int = 0
    crashes_armed: int = 0
    function_errors: Counter[str] = field(default_factory=Counter)
    unexpected_errors: list[FunctionError] = field(default_factory=list)
    in_flight: int = 0
    poller_errors: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def record_error(self, error: FunctionError) -> None:
        with self._lock:
            self.function_errors[error.error_type] += 1
            if not error.injected:
                self.unexpected_errors.append(error)


def _lambda_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    """A ReceiveMessage message attribute in the Lambda event's camelCase shape."""
    result: dict[str, Any] = {
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": value["DataType"],
    }
    if "StringValue" in value:
        result["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        result["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
    return result


def lambda_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One SQS message as a record of the event Lambda sends to the function."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: _lambda_attribute(value) for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", hashlib.md5(message["Body"].encode()).hexdigest()),  # noqa: S324
        "md5OfMessageAttributes": message.get("MD5OfMessageAttributes"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def reported_failures(payload: Any, message_ids: Sequence[str]) -> set[str] | None:
    """The message ids the function reported as failed; None when the report is invalid.

    As in Lambda: a missing or empty ``batchItemFailures`` means all succeeded; an entry whose
    ``itemIdentifier`` is missing, empty or not in the batch makes the whole batch fail.
    """
    if payload is None:
        return set()
    if not isinstance(payload, Mapping):
        return None
    failures = payload.get("batchItemFailures") or []
    if not isinstance(failures, list):
        return None
    ids = set()
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
        if not identifier or identifier not in message_ids:
            return None
        ids.add(str(identifier))
    return ids


class SqsPoller:
    """Feeds one queue to the function through a set of execution environments (one worker each)."""

    def __init__(
        self,
        endpoint: Endpoint,
        mapping: QueueMapping,
        environments: Sequence[FunctionProcess],
        *,
        visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT_SECONDS,
        crash_plan: CrashPlan | None = None,
        stop_on_unexpected_error: bool = True,
    ) -> None:
        self._endpoint = endpoint
        self._mapping = mapping
        self._environments = list(environments)
        self._visibility_timeout = visibility_timeout
        # Hidden while an invocation may run: the function's timeout, the runtime's grace, a margin.
        timeout = max((environment.function.timeout_seconds for environment in self._environments), default=0)
        self._receive_visibility = max(visibility_timeout, timeout + math.ceil(TIMEOUT_GRACE_SECONDS) + 1)
        self._crash_plan = crash_plan
        self._stop_on_unexpected_error = stop_on_unexpected_error
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # For queue_depth, which a drain polls 4 times a second: a client made per call (its own boto3
        # session) costs about 100 ms of CPU.
        self._depth_sqs = endpoint.client("sqs")
        self.stats = PollerStats()
        self.last_poller_error: str | None = None

    @property
    def stopped_by_error(self) -> bool:
        return self._stop_on_unexpected_error and bool(self.stats.unexpected_errors)

    def start(self) -> None:
        for index, environment in enumerate(self._environments):
            thread = threading.Thread(target=self._work, args=(environment,), name=f"poller-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def _receive(self, sqs: Any) -> list[dict[str, Any]]:
        """One batch: up to ``batch_size`` messages, gathered during the batching window if there is one."""
        messages: list[dict[str, Any]] = []
        window_ends = 0.0
        while len(messages) < self._mapping.batch_size and not self._stop.is_set():
            window_left = window_ends - time.monotonic()
            if messages and window_left <= 0 and self._mapping.batching_window_seconds:
                break
            wait = RECEIVE_WAIT_SECONDS if not messages else min(RECEIVE_WAIT_SECONDS, max(0, math.ceil(window_left)))
            response = sqs.receive_message(
                QueueUrl=self._mapping.queue_url,
                MaxNumberOfMessages=min(SQS_MAX_RECEIVE, self._mapping.batch_size - len(messages)),
                VisibilityTimeout=self._receive_visibility,
                WaitTimeSeconds=wait,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            if not messages:
                window_ends = time.monotonic() + self._mapping.batching_window_seconds
            if not received and (not messages or window_ends <= time.monotonic()):
                break
            messages.extend(received)
        return messages

    def _work(self, environment: FunctionProcess) -> None:
        sqs = self._endpoint.client("sqs")
        while not self._stop.is_set():
            try:
                messages = self._receive(sqs)
                if not messages:
                    continue
                self.stats.add(in_flight=1, records_received=len(messages))
                try:
                    self._deliver(sqs, environment, messages)
                finally:
                    self.stats.add(in_flight=-1)
            except Exception as exc:  # the endpoint failed us: what was received comes back by itself
                self.stats.add(poller_errors=1)
                self.last_poller_error = f"{type(exc).__name__}: {exc}"
                self._stop.wait(1.0)

    def _deliver(self, sqs: Any, environment: FunctionProcess, messages: list[dict[str, Any]]) -> None:
        records = [lambda_record(message, self._mapping.queue_arn, self._endpoint.region) for message in messages]
        crash = None if self._crash_plan is None else self._crash_plan(records)
        event = {"Records": records}
        invocation: Invocation = environment.invoke(event, crash)
        self.stats.add(invocations=1, cold_starts=int(invocation.cold_start), crashes_armed=int(crash is not None))
        if invocation.error is not None:
            # The whole batch stays in the queue and comes back after its visibility timeout.
            self.stats.record_error(invocation.error)
            if invocation.error.injected:
                self.stats.add(crashes_injected=1)
            elif self._stop_on_unexpected_error:
                self._stop.set()
            self._release(sqs, messages)
            return
        ids = [message["MessageId"] for message in messages]
        failed = reported_failures(invocation.payload, ids) if self._mapping.reports_batch_item_failures else set()
        if failed is None:
            failed = set(ids)
        self.stats.add(records_reported_failed=len(failed))
        self._release(sqs, [message for message in messages if message["MessageId"] in failed])
        done = [message for message in messages if message["MessageId"] not in failed]
        for start in range(0, len(done), SQS_MAX_RECEIVE):
            chunk = done[start : start + SQS_MAX_RECEIVE]
            response = sqs.delete_message_batch(
                QueueUrl=self._mapping.queue_url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]} for index, message in enumerate(chunk)
                ],
            )
            self.stats.add(records_deleted=len(response.get("Successful", [])))

    def _release(self, sqs: Any, messages: Sequence[Mapping[str, Any]]) -> None:
        """Let what failed come back after ``visibility_timeout`` seconds rather than the receive's."""
        for start in range(0, len(messages), SQS_MAX_RECEIVE):
            chunk = messages[start : start + SQS_MAX_RECEIVE]
            sqs.change_message_visibility_batch(
                QueueUrl=self._mapping.queue_url,
                Entries=[
                    {
                        "Id": str(index),
                        "ReceiptHandle": message["ReceiptHandle"],
                        "VisibilityTimeout": self._visibility_timeout,
                    }
                    for index, message in enumerate(chunk)
                ],
            )

    def queue_depth(self) -> tuple[int, int]:
        """(visible, in flight) messages of the source queue."""
        return queue_depth(self._depth_sqs, self._mapping.queue_url)

    def wait_until_drained(
        self, *, timeout: float, settle_seconds: float = 1.0, on_tick: Callable[[int, int], None] | None = None
    ) -> bool:
        """Wait until the queue holds no message, visible or in flight, for ``settle_seconds``.

        Returns False on timeout, or when an unexpected function error stopped the poller.
        """
        deadline = time.monotonic() + timeout
        empty_since: float | None = None
        while time.monotonic() < deadline:
            if self.stopped_by_error:
                return False
            visible, in_flight = self.queue_depth()
            if on_tick is not None:
                on_tick(visible, in_flight)
            if visible == 0 and in_flight == 0 and self.stats.in_flight == 0:
                empty_since = empty_since or time.monotonic()
                if time.monotonic() - empty_since >= settle_seconds:
                    return True
            else:
                empty_since = None
            time.sleep(0.25)
        return False
