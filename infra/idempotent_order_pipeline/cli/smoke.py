"""``order-pipeline smoke``: the acceptance check of a deployed pipeline, run after each ``cdk deploy``.

A run sends a handful of canary orders through the deployed pipeline and watches what it does with
them, with nothing but the operator's credentials and the stack's name. Every id it writes names
the run: event ids and order ids ``smoke-<run id>-1`` ... ``-N`` and ``smoke-<run id>-invalid``,
the temporary queue ``order-pipeline-smoke-<run id>`` (:mod:`.inbox`). In order:

1. the canaries (``--order``: the fields a pipeline with an ``order_schema`` needs; the run sets
   ``order_id`` and ``event_id``) are checked by the producer client, as ``send`` checks orders,
   before anything is made: a canary the pipeline would refuse stops the run with the reason;
2. the temporary queue is created and subscribed to the topic, filtered to this run's event ids;
3. the canaries go out through the producer client (on FIFO: a group per order, as it sets them);
4. it waits until each is recorded once (the state record and the order row, both holding the
   fingerprint of what was sent), marked ``sent``, and its notification reached the queue;
5. it sends canary 1 again (on FIFO with a deduplication id of its own, so that SQS hands it to the
   consumer and the consumer's own idempotency is what is checked), then one invalid canary (it
   carries the reserved field ``payload_sha256``, which the consumer refuses whatever the schema);
6. it waits until the invalid canary is parked in the DLQ with ``INVALID_MESSAGE`` and then
   :data:`SETTLE_SECONDS` more, and checks that canary 1's record and row are unchanged and that no
   second notification came;
7. it removes what it made, whatever happened before (also on Ctrl-C, SIGTERM and failure): the
   subscription and the queue, the order rows and state records (each delete conditioned on the
   item being this run's), and this run's copies in the DLQ, no other message.

Every wait shares one deadline, ``--timeout`` after the canaries went out; the removal after it
makes a bounded number of calls and never waits. A canary the consumer has not taken by then may
still be in the pipeline's queue, where nothing but the consumer may read it: it is named, and
``smoke --clean-up RUN_ID`` removes what it leaves once the consumer took it (or SQS moved it to
the DLQ).

The checks (:data:`CHECKS`) are a contract: ``--json`` prints one object with each check's
``status`` (``pass``, ``fail``, ``skip``: not run, because what it needs failed) and ``detail``.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import (
    ORDER_ID_FIELD,
    PAYLOAD_SHA256_FIELD,
    parse_body,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    EVENT_ID_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    STATUS_SENT,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import sns_group_id
from idempotent_order_pipeline.cli.aws import queue_arn
from idempotent_order_pipeline.cli.context import Operator, operator_of, reported, seconds_option, wants_json
from idempotent_order_pipeline.cli.dead_letters import MAX_RECEIVES, DeadLetter, Selection, drop
from idempotent_order_pipeline.cli.errors import OperationsError, describe
from idempotent_order_pipeline.cli.inbox import Inbox, event_id_prefix
from idempotent_order_pipeline.cli.output import Failure, echo
from idempotent_order_pipeline.cli.records import get
from idempotent_order_pipeline.cli.render import age, short, to_json
from idempotent_order_pipeline.errors import InvalidMessageError, PermanentError
from idempotent_order_pipeline.keys import EVENT_ID_FIELD, IDEMPOTENCY_KEY_ATTRIBUTE, payload_sha256
from idempotent_order_pipeline.producer import OrderPublisher, PreparedOrder, encode_body

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: The checks, in the order they run (a contract: ``--json`` keys, the summary's names).
CHECKS = ("recorded", "sent", "notified", "resend_ignored", "invalid_parked", "cleanup")
PASS, FAIL, SKIP = "pass", "fail", "skip"
DEFAULT_CANARIES = 3
#: At most this many canaries (``--clean-up`` tries every id up to it).
MAX_CANARIES = 10
#: Default of ``--timeout``: how long the run waits for the pipeline, all waits together.
DEFAULT_TIMEOUT_SECONDS = 60
DEFAULT_TIMEOUT = f"{DEFAULT_TIMEOUT_SECONDS}s"
#: Seconds between two looks at the tables, the temporary queue and the DLQ.
POLL_SECONDS = 1.0
#: How long after the invalid canary (sent after the re-send) was parked the run still watches canary 1.
SETTLE_SECONDS = 5.0
#: The exit code of a run stopped by Ctrl-C or SIGTERM (after its clean-up): 128 + SIGINT.
EXIT_INTERRUPTED = 130
#: The last part of the invalid canary's ids.
INVALID_SUFFIX = "invalid"
#: The value of the reserved field that makes the invalid canary invalid.
INVALID_MARK = "smoke: a reserved field, so the consumer parks this order"
#: A run id: the UTC time it started and 6 random hex digits.
RUN_ID = re.compile(r"\d{14}-[0-9a-f]{6}")

# Conditions of the removal: an item is deleted only if it is this run's.
#: A state record is this run's when its order is one of the run's (its key is one of the run's too).
record_is_this_runs = "begins_with(order_id, :prefix)"
#: An order row is this run's when the event that recorded it is one of the run's.
row_is_this_runs = "begins_with(event_id, :prefix)"

#: How a run waits between two looks, and reads the time (tests replace them).
pause: Callable[[float], None] = time.sleep
clock: Callable[[], float] = time.monotonic


def new_run_id() -> str:
    """A fresh run id: ``20261130091500-3fa9c1``."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class Check:
    """One check's outcome."""

    name: str
    status: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail}


@dataclass
class Canary:
    """One canary order: what was sent, and what the tables said at the last look."""

    prepared: PreparedOrder
    fingerprint: str
    state: dict[str, Any] | None = None
    row: dict[str, Any] | None = None

    @property
    def event_id(self) -> str:
        return self.prepared.event_id

    @property
    def order_id(self) -> str:
        return self.prepared.order_id

    @property
    def recorded(self) -> bool:
        """Recorded once, as sent: the record and the row name each other and hold the fingerprint sent."""
        return (
            self.state is not None
            and self.row is not None
            and self.state.get(ORDER_ID_FIELD) == self.order_id
            and self.state.get(PAYLOAD_SHA256_FIELD) == self.fingerprint
            and self.row.get(EVENT_ID_FIELD) == self.event_id
            and self.row.get(PAYLOAD_SHA256_FIELD) == self.fingerprint
        )

    @property
    def sent(self) -> bool:
        return self.state is not None and self.state.get(STATUS_ATTRIBUTE) == STATUS_SENT


@dataclass(frozen=True)
class Target:
    """What a run works on: the pipeline's resources and clients, found as every command finds them."""

    operator: Operator
    publisher: OrderPublisher
    queue_url: str
    dead_letter_queue_url: str
    events_table: str
    orders_table: str
    topic_arn: str
    function: str | None
    pipeline: str | None

    @classmethod
    def of(cls, operator: Operator) -> Target:
        resources = operator.resources
        try:
            function: str | None = resources.get("function")
        except OperationsError:
            function = None
        try:
            found = resources.pipeline()
        except OperationsError:
            found = None
        return cls(
            operator=operator,
            publisher=operator.publisher(),
            queue_url=resources.queue_url,
            dead_letter_queue_url=resources.dead_letter_queue_url,
            events_table=resources.processed_events_table,
            orders_table=resources.order_records_table,
            topic_arn=resources.topic_arn,
            function=function,
            pipeline=found.path if found is not None else None,
        )

    @property
    def fifo(self) -> bool:
        return self.publisher.fifo


@dataclass
class Removed:
    """What the clean-up removed, and what it could not."""

    records: int = 0
    rows: int = 0
    dead_letters: list[DeadLetter] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Ids of messages this run sent that the consumer may not have taken yet.
    left_in_queue: list[str] = field(default_factory=list)


@dataclass
class Report:
    """A run's outcome: every check, what was removed, what is left."""

    run_id: str
    stack: str
    pipeline: str | None
    fifo: bool
    canaries: list[str]
    timeout: int
    checks: dict[str, Check] = field(default_factory=dict)
    removed: Removed = field(default_factory=Removed)
    seconds: float = 0.0
    interrupted: bool = False

    def with_status(self, status: str) -> list[str]:
        return [name for name in CHECKS if name in self.checks and self.checks[name].status == status]

    @property
    def passed(self) -> bool:
        return not self.interrupted and self.with_status(PASS) == list(CHECKS)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "stack": self.stack,
            "pipeline": self.pipeline,
            "fifo": self.fifo,
            "canaries": self.canaries,
            "timeout_seconds": self.timeout,
            "seconds": round(self.seconds, 1),
            "passed": self.passed,
            "interrupted": self.interrupted,
            "failed": self.with_status(FAIL),
            "skipped": self.with_status(SKIP),
            "checks": {name: self.checks[name].as_dict() for name in CHECKS if name in self.checks},
            "removed": {
                "state_records": self.removed.records,
                "order_rows": self.removed.rows,
                "dead_letters": len(self.removed.dead_letters),
            },
            "left_in_queue": self.removed.left_in_queue,
            "problems": self.removed.problems,
        }


class _Deadline:
    """The run's one deadline: every wait is cut to what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = clock() + seconds

    def expired(self) -> bool:
        return clock() >= self._end

    def wait(self, seconds: float) -> None:
        left = self._end - clock()
        if left > 0:
            pause(min(seconds, left))


class Smoke:
    """One run (:meth:`run`), or the clean-up of an earlier one (:meth:`clean_up`)."""

    def __init__(
        self,
        target: Target,
        *,
        run_id: str,
        canaries: int = DEFAULT_CANARIES,
        template: Mapping[str, Any] | None = None,
        timeout: int = DEFAULT_TIMEOUT_SECONDS,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.target = target
        self.run_id = run_id
        self.prefix = event_id_prefix(run_id)
        self.count = canaries
        self.template = dict(template or {})
        self.timeout = timeout
        self.say = say
        clients = target.operator.clients
        self.sqs, self.dynamodb = clients.sqs, clients.dynamodb
        self.inbox = Inbox(clients.sqs, clients.sns, target.topic_arn, run_id)
        self.canaries: list[Canary] = []
        self.invalid_id = self.prefix + INVALID_SUFFIX
        #: What this run sent to the queue (event ids; a re-send as ``<id> (sent again)``), and
        #: whether the consumer is known to have taken it.
        self.sent: dict[str, bool] = {}
        #: This run's copies taken from the DLQ by a check (the clean-up counts them with its own).
        self.dropped: list[DeadLetter] = []

    # --- the run ---------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Build the canaries and check them as the producer does, before anything is made.

        Raises:
            OperationsError: the pipeline would refuse them (its ``order_schema``: pass ``--order``).
        """
        for number in range(1, self.count + 1):
            ids = f"{self.prefix}{number}"
            order = {**self.template, ORDER_ID_FIELD: ids, EVENT_ID_FIELD: ids}
            try:
                prepared = self.target.publisher.prepare(order)
            except PermanentError as exc:
                raise OperationsError(
                    f"the canary order is refused before sending ({exc.error_code}: {exc}); pass --order with "
                    "an order the pipeline accepts (smoke sets its order_id and event_id)"
                ) from exc
            self.canaries.append(Canary(prepared, payload_sha256(parse_body(prepared.body))))

    def run(self) -> Report:
        """Run every check, then remove what the run made (also when interrupted or failing)."""
        report = Report(
            run_id=self.run_id,
            stack=self.target.operator.stack.name,
            pipeline=self.target.pipeline,
            fifo=self.target.fifo,
            canaries=[canary.event_id for canary in self.canaries],
            timeout=self.timeout,
        )
        started = clock()
        try:
            with _terminate_interrupts():
                self._check(report)
        except KeyboardInterrupt:
            report.interrupted = True
            self.say("interrupted: removing what the run made")
            for name in CHECKS[:-1]:
                report.checks.setdefault(name, Check(name, SKIP, "not run: interrupted"))
        except (ClientError, BotoCoreError) as exc:
            done = ", ".join(report.checks) or "none"
            self.say(f"stopped by an AWS error ({describe(exc)}); checks done: {done}; removing what the run made")
            for name in CHECKS[:-1]:
                report.checks.setdefault(name, Check(name, FAIL, f"not run: the run stopped on {describe(exc)}"))
        finally:
            with _interrupts_deferred():
                report.removed = self._remove(range(1, self.count + 1))
                report.checks["cleanup"] = _cleanup_check(report.removed, self.run_id)
            _add_what_the_dlq_said(report)
            report.seconds = clock() - started
        return report

    def _check(self, report: Report) -> None:
        self.inbox.open()
        self.say(f"temporary queue {self.inbox.name} subscribed to {self.target.topic_arn}")
        # In the queue, as far as anyone knows, from the moment the call starts (Ctrl-C may stop it midway).
        self.sent.update((canary.event_id, False) for canary in self.canaries)
        results = self.target.publisher.send_prepared([canary.prepared for canary in self.canaries])
        not_sent = [f"{r.event_id}: {r.error}" for r in results if not r.ok]
        for result in results:
            if not result.ok:
                self.sent.pop(str(result.event_id), None)
        deadline = _Deadline(self.timeout)
        if not_sent:
            report.checks["recorded"] = Check("recorded", FAIL, "canaries not sent: " + "; ".join(not_sent))
            for name in CHECKS[1:-1]:
                report.checks[name] = Check(name, SKIP, "not run: the canaries were not sent")
            return
        self.say(
            f"sent {len(self.canaries)} canaries to {self.target.queue_url}; waiting up to {age(self.timeout)} "
            "for each to be recorded, marked sent and notified"
        )
        self._await_canaries(deadline)
        report.checks.update((check.name, check) for check in self._canary_checks())
        first = self.canaries[0]
        if not (first.recorded and first.sent):
            why = "canary 1 was not recorded and marked sent"
            for name in ("resend_ignored", "invalid_parked"):
                report.checks[name] = Check(name, SKIP, f"not run: {why}")
            return
        if deadline.expired():
            for name in ("resend_ignored", "invalid_parked"):
                report.checks[name] = Check(name, SKIP, f"not run: the timeout ({age(self.timeout)}) was reached")
            return
        report.checks.update((check.name, check) for check in self._resend_and_invalid(deadline))

    def _look(self, canary: Canary) -> None:
        if not canary.sent:
            canary.state = get(self.dynamodb, self.target.events_table, EVENT_ID_ATTRIBUTE, canary.event_id)
        if canary.row is None or not canary.recorded:
            canary.row = get(self.dynamodb, self.target.orders_table, ORDER_ID_FIELD, canary.order_id)
        if canary.state is not None:
            self.sent[canary.event_id] = True

    def _done(self, canary: Canary) -> bool:
        return canary.recorded and canary.sent and self.inbox.notified[canary.event_id] > 0

    def _await_canaries(self, deadline: _Deadline) -> None:
        while True:
            self.inbox.read()
            for canary in self.canaries:
                if not self._done(canary):
                    self._look(canary)
            if all(self._done(canary) for canary in self.canaries) or deadline.expired():
                return
            deadline.wait(POLL_SECONDS)

    def _canary_checks(self) -> Iterator[Check]:
        total, within = len(self.canaries), age(self.timeout)
        recorded = [canary for canary in self.canaries if canary.recorded]
        anomalies = [_anomaly(canary) for canary in self.canaries if canary.state is not None and not canary.recorded]
        missing = [canary.event_id for canary in self.canaries if canary.state is None and canary.row is None]
        if len(recorded) == total:
            yield Check("recorded", PASS, f"{total} of {total} canaries recorded once (state record and order row)")
        elif not recorded and not anomalies:
            yield Check(
                "recorded",
                FAIL,
                f"no canary was recorded within {within}: the consumer did not record anything"
                f"{self._mapping_note()}; check its logs ({self._logs_hint()})",
            )
        else:
            parts = [f"{len(recorded)} of {total} canaries recorded within {within}"]
            if missing:
                parts.append(f"not recorded: {', '.join(missing)}")
            parts.extend(anomalies)
            yield Check("recorded", FAIL, "; ".join(parts))
        sent = [canary for canary in recorded if canary.sent]
        pending = [canary.event_id for canary in recorded if not canary.sent]
        if len(sent) == total:
            yield Check("sent", PASS, f"{total} of {total} marked {STATUS_SENT}")
        else:
            detail = f"{len(sent)} of {total} marked {STATUS_SENT} within {within}"
            if pending:
                detail += (
                    f"; still pending (SNS did not accept the notification: the topic's policy or key, the "
                    f"function's logs): {', '.join(pending)}"
                )
            yield Check("sent", FAIL, detail)
        notified = [canary for canary in self.canaries if self.inbox.notified[canary.event_id]]
        if len(notified) == total:
            yield Check("notified", PASS, f"{total} of {total} notifications reached the temporary subscription")
        else:
            silent = [canary.event_id for canary in sent if not self.inbox.notified[canary.event_id]]
            detail = f"{len(notified)} of {total} notifications reached the temporary subscription within {within}"
            if silent:
                detail += (
                    f"; marked sent but not delivered: {', '.join(silent)} (a new subscription's filter policy "
                    "can take minutes to apply on AWS: run again)"
                )
            yield Check("notified", FAIL, detail)

    def _resend_and_invalid(self, deadline: _Deadline) -> Iterator[Check]:
        first = self.canaries[0]
        state_before, row_before = dict(first.state or {}), dict(first.row or {})
        notified_before = self.inbox.notified[first.event_id]
        # On FIFO a deduplication id of its own, or SQS would drop it unseen within five minutes of the
        # first send, and the consumer's own idempotency would go unchecked.
        again = replace(first.prepared, deduplication_id=uuid.uuid4().hex) if self.target.fifo else first.prepared
        resent = f"{first.event_id} (sent again)"
        self.sent[resent] = False
        [result] = self.target.publisher.send_prepared([again])
        if not result.ok:
            self.sent.pop(resent)
            yield Check("resend_ignored", FAIL, f"the re-send was not sent: {result.error}")
        self._send_invalid()
        self.say(f"sent {first.event_id} again and the invalid canary {self.invalid_id}; waiting for it to be parked")
        parked: DeadLetter | None = None
        settled_at: float | None = None
        while True:
            self.inbox.read()
            if parked is None:
                found = drop(
                    self.sqs,
                    self.target.dead_letter_queue_url,
                    Selection(event_id=self.invalid_id),
                    wait_seconds=0,
                    identity_fields=self.target.publisher.identity_fields,
                    limit=1,
                )
                if found.deleted:
                    parked, settled_at = found.deleted[0], clock() + SETTLE_SECONDS
                    self.sent[self.invalid_id] = True
                    self.dropped.append(parked)
            if (settled_at is not None and clock() >= settled_at) or deadline.expired():
                break
            deadline.wait(POLL_SECONDS)
        state_after = get(self.dynamodb, self.target.events_table, EVENT_ID_ATTRIBUTE, first.event_id)
        row_after = get(self.dynamodb, self.target.orders_table, ORDER_ID_FIELD, first.order_id)
        invalid_state = get(self.dynamodb, self.target.events_table, EVENT_ID_ATTRIBUTE, self.invalid_id)
        invalid_row = get(self.dynamodb, self.target.orders_table, ORDER_ID_FIELD, self.invalid_id)
        if result.ok:
            yield self._resend_check(
                first.event_id,
                changed=state_after != state_before or row_after != row_before,
                notified_again=self.inbox.notified[first.event_id] - notified_before,
                confirmed=parked is not None,
            )
            # Read before the invalid canary sent after it (all but surely: a queue does not promise order).
            self.sent[resent] = parked is not None
        yield self._invalid_check(parked, recorded=invalid_state is not None or invalid_row is not None)

    def _send_invalid(self) -> None:
        body = encode_body(
            {
                **self.template,
                ORDER_ID_FIELD: self.invalid_id,
                EVENT_ID_FIELD: self.invalid_id,
                PAYLOAD_SHA256_FIELD: INVALID_MARK,
            }
        )
        fifo: dict[str, str] = {}
        if self.target.fifo:
            fifo = {"MessageGroupId": sns_group_id(self.invalid_id), "MessageDeduplicationId": uuid.uuid4().hex}
        self.sent[self.invalid_id] = False
        self.sqs.send_message(
            QueueUrl=self.target.queue_url,
            MessageBody=body,
            MessageAttributes={IDEMPOTENCY_KEY_ATTRIBUTE: {"DataType": "String", "StringValue": self.invalid_id}},
            **fifo,  # type: ignore[arg-type]
        )

    def _resend_check(self, event_id: str, *, changed: bool, notified_again: int, confirmed: bool) -> Check:
        if changed:
            return Check("resend_ignored", FAIL, f"{event_id} sent again changed its state record or order row")
        if notified_again:
            return Check("resend_ignored", FAIL, f"{event_id} sent again was notified again ({notified_again} more)")
        if not confirmed:
            return Check(
                "resend_ignored",
                FAIL,
                f"{event_id} sent again: not confirmed, the invalid canary sent after it was not parked within "
                f"{age(self.timeout)}, so the consumer may not have read the re-send yet",
            )
        return Check(
            "resend_ignored",
            PASS,
            f"{event_id} sent again: nothing written, nothing notified (watched {age(SETTLE_SECONDS)} after the "
            "consumer parked the invalid canary sent after it)",
        )

    def _invalid_check(self, parked: DeadLetter | None, *, recorded: bool) -> Check:
        expected = InvalidMessageError.error_code
        if recorded:
            return Check("invalid_parked", FAIL, f"ANOMALY: the invalid canary {self.invalid_id} was recorded")
        if parked is None:
            return Check(
                "invalid_parked",
                FAIL,
                f"{self.invalid_id} was not parked in the DLQ within {age(self.timeout)} (expected {expected})",
            )
        if parked.error_code != expected:
            return Check(
                "invalid_parked",
                FAIL,
                f"{self.invalid_id} parked as {parked.error_code}, expected {expected}: "
                f"{short(parked.error_message, 120)}",
            )
        return Check(
            "invalid_parked", PASS, f"{self.invalid_id} parked as {expected}: {short(parked.error_message, 80)}"
        )

    # --- diagnosis --------------------------------------------------------------------------------

    def _mapping_note(self) -> str:
        """Why the consumer may not run, from its event source mapping (empty when it cannot be read)."""
        if self.target.function is None:
            return ""
        try:
            arn = queue_arn(self.sqs, self.target.queue_url)
            mappings = self.target.operator.clients.lambda_.list_event_source_mappings(
                FunctionName=self.target.function
            )["EventSourceMappings"]
        except (ClientError, BotoCoreError):
            return ""
        mine = [mapping for mapping in mappings if mapping.get("EventSourceArn") == arn]
        if not mine:
            return f" (function {self.target.function} has no event source mapping on the queue)"
        states = {str(mapping.get("State", "?")) for mapping in mine}
        return (
            "" if states <= {"Enabled", "Enabling"} else f" (its event source mapping is {', '.join(sorted(states))})"
        )

    def _logs_hint(self) -> str:
        if self.target.function is None:
            return "its log group"
        group = f"/aws/lambda/{self.target.function}"
        with contextlib.suppress(ClientError, BotoCoreError, KeyError):
            configuration = self.target.operator.clients.lambda_.get_function_configuration(
                FunctionName=self.target.function
            )
            group = configuration.get("LoggingConfig", {}).get("LogGroup") or group
        return f"aws logs tail {group} --since 10m"

    # --- the clean-up -----------------------------------------------------------------------------

    def clean_up(self) -> Removed:
        """Remove what run ``run_id`` left: its queue and subscription, rows, records and DLQ copies."""
        with _interrupts_deferred():
            return self._remove(range(1, MAX_CANARIES + 1))

    def _remove(self, numbers: range) -> Removed:
        removed = Removed(problems=self.inbox.close())
        ids = [f"{self.prefix}{number}" for number in numbers] + [self.invalid_id]
        for event_id in ids:
            try:
                removed.records += _delete(
                    self.dynamodb,
                    self.target.events_table,
                    EVENT_ID_ATTRIBUTE,
                    event_id,
                    record_is_this_runs,
                    self.prefix,
                )
                removed.rows += _delete(
                    self.dynamodb, self.target.orders_table, ORDER_ID_FIELD, event_id, row_is_this_runs, self.prefix
                )
            except OperationsError as exc:
                removed.problems.append(str(exc))
        try:
            dropped = drop(
                self.sqs,
                self.target.dead_letter_queue_url,
                Selection(event_id_prefix=self.prefix),
                wait_seconds=0,
                identity_fields=self.target.publisher.identity_fields,
            )
            removed.dead_letters = [*self.dropped, *dropped.deleted]
            # (Nothing of this run waits behind another's messages on a FIFO DLQ: each canary is a group of its own.)
            removed.problems.extend(f"DLQ copy {letter.message_id} was not deleted" for letter in dropped.left)
        except (ClientError, BotoCoreError) as exc:
            removed.problems.append(f"the DLQ was not searched for this run's copies ({describe(exc)})")
        for letter in removed.dead_letters:
            if letter.event_id in self.sent:
                self.sent[letter.event_id] = True
        removed.left_in_queue = [label for label, taken in self.sent.items() if not taken]
        return removed


def _delete(dynamodb: DynamoDBClient, table: str, key: str, value: str, condition: str, prefix: str) -> int:
    """Delete one item if it exists and is this run's; 1 if one was deleted.

    Raises:
        OperationsError: it is not this run's (the condition failed), or the call failed.
    """
    try:
        response = dynamodb.delete_item(
            TableName=table,
            Key={key: {"S": value}},
            ConditionExpression=f"attribute_not_exists({key}) OR {condition}",
            ExpressionAttributeValues={":prefix": {"S": prefix}},
            ReturnValues="ALL_OLD",
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            raise OperationsError(f"{table}: {value} is not this run's ({condition} is false): left as it is") from exc
        raise OperationsError(f"{table}: {value} was not deleted ({describe(exc)})") from exc
    except BotoCoreError as exc:
        raise OperationsError(f"{table}: {value} was not deleted ({describe(exc)})") from exc
    return 1 if response.get("Attributes") else 0


def _anomaly(canary: Canary) -> str:
    """What is wrong with a canary that has a state record but is not recorded as sent."""
    if canary.row is None:
        return f"{canary.event_id}: a state record without its order row"
    if canary.state is not None and canary.state.get(PAYLOAD_SHA256_FIELD) != canary.fingerprint:
        return f"ANOMALY: {canary.event_id}'s state record holds another fingerprint than what was sent"
    return f"ANOMALY: {canary.event_id}'s order row does not match its state record"


def _add_what_the_dlq_said(report: Report) -> None:
    """A failed ``recorded`` says how many canaries SQS dead-lettered: every delivery of them failed."""
    recorded = report.checks.get("recorded")
    canaries = set(report.canaries)
    moved = [
        letter
        for letter in report.removed.dead_letters
        if letter.error_code == MAX_RECEIVES and letter.event_id in canaries
    ]
    if recorded is not None and recorded.status == FAIL and moved:
        report.checks["recorded"] = replace(
            recorded,
            detail=f"{recorded.detail}; {len(moved)} canaries reached the DLQ after max_receive_count receives: "
            "every delivery of them failed",
        )


def _cleanup_check(removed: Removed, run_id: str) -> Check:
    letters = len(removed.dead_letters)
    codes = Counter(letter.error_code for letter in removed.dead_letters)
    by_code = f" ({', '.join(f'{n} {code}' for code, n in sorted(codes.items()))})" if codes else ""
    detail = (
        f"removed {removed.rows} order row(s), {removed.records} state record(s), {letters} DLQ cop"
        f"{'y' if letters == 1 else 'ies'}{by_code}, the temporary subscription and queue"
    )
    problems = list(removed.problems)
    if removed.left_in_queue:
        problems.append(
            f"{len(removed.left_in_queue)} message(s) the consumer did not take may still be in the queue "
            f"({', '.join(removed.left_in_queue)}): once it has (or the queue moved them to the DLQ), "
            f"`order-pipeline smoke --clean-up {run_id}` removes what they leave"
        )
    if problems:
        return Check("cleanup", FAIL, detail + "; " + "; ".join(problems))
    return Check("cleanup", PASS, detail)


# --- signals -----------------------------------------------------------------------------------------


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _terminate_interrupts() -> Iterator[None]:
    """SIGTERM (a CI job cancelled) stops the run as Ctrl-C does, so its clean-up runs."""
    if not _in_main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the clean-up is done (a second Ctrl-C must not leave the queue behind)."""
    if not _in_main_thread():
        yield
        return
    received: list[int] = []

    def note(signum: int, frame: object) -> None:
        received.append(signum)
        echo("still removing what the smoke run made; it stops when that is done", err=True)

    previous = {number: signal.signal(number, note) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# --- the command -------------------------------------------------------------------------------------


def _template(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        raw = Path(text[1:]).read_text(encoding="utf-8") if text.startswith("@") else text
        order = parse_body(raw)
    except (OSError, PermanentError) as exc:
        raise click.BadParameter(f"{text!r:.80}: {exc}", param_hint="--order") from exc
    return dict(order)


_HEADER = f"{'CHECK':<16}{'RESULT':<8}DETAIL"


def _print(report: Report, *, as_json: bool) -> None:
    if as_json:
        echo(to_json(report.as_dict()))
        return
    kind = "FIFO" if report.fifo else "standard"
    echo(
        f"smoke run {report.run_id}: stack {report.stack}, pipeline {report.pipeline or '-'} ({kind}), "
        f"{len(report.canaries)} canaries, timeout {age(report.timeout)}"
    )
    echo(_HEADER)
    for name in CHECKS:
        if name in report.checks:
            check = report.checks[name]
            echo(f"{name:<16}{check.status:<8}{check.detail}")


@click.command()
@click.option(
    "--canaries",
    type=click.IntRange(1, MAX_CANARIES),
    default=DEFAULT_CANARIES,
    show_default=True,
    help="Canary orders to send.",
)
@click.option(
    "--order",
    "order_text",
    metavar="JSON|@FILE",
    help="The canary's fields (what the pipeline's order_schema requires); smoke sets order_id and event_id.",
)
@click.option(
    "--timeout",
    default=DEFAULT_TIMEOUT,
    show_default=True,
    callback=seconds_option,
    help="Wait at most this long for the pipeline, all waits together (the clean-up follows, without waiting).",
)
@click.option(
    "--clean-up",
    "clean_up_run",
    metavar="RUN_ID",
    help="Send nothing: remove what run RUN_ID left (its rows, records, DLQ copies, queue and subscription).",
)
@click.option("--json", "as_json", is_flag=True, help="The outcome as one JSON object on stdout.")
@click.pass_context
@reported
def smoke(
    ctx: click.Context,
    canaries: int,
    order_text: str | None,
    timeout: int,
    clean_up_run: str | None,
    as_json: bool,
) -> None:
    """Check a deployed pipeline end to end with canary orders, then remove them (after every cdk deploy).

    Sends canaries (ids smoke-<run id>-...) through the producer client and checks that each is
    recorded once, marked sent and notified (a temporary queue subscribed to the topic, filtered
    to the run), that a re-send writes and notifies nothing, and that an invalid order is parked
    as INVALID_MESSAGE. Then it removes everything it made - also on Ctrl-C and on failure.
    Exit 0 when every check passed, 1 naming each that did not, 130 when interrupted.
    """
    as_json = wants_json(ctx, as_json)
    template = _template(order_text)
    operator = operator_of(ctx)
    if clean_up_run is not None:
        if RUN_ID.fullmatch(clean_up_run) is None:
            raise click.BadParameter(
                f"{clean_up_run!r} is not a run id (such as 20261130091500-3fa9c1)", param_hint="--clean-up"
            )
        _clean_up(operator, clean_up_run, as_json=as_json)
        return
    run = Smoke(
        Target.of(operator),
        run_id=new_run_id(),
        canaries=canaries,
        template=template,
        timeout=timeout,
        say=lambda line: echo(line, err=True),
    )
    run.prepare()
    report = run.run()
    _print(report, as_json=as_json)
    failed, skipped = report.with_status(FAIL), report.with_status(SKIP)
    if report.interrupted:
        echo(f"smoke run {report.run_id} interrupted; {report.checks['cleanup'].detail}", err=True)
        ctx.exit(EXIT_INTERRUPTED)
    if failed or skipped:
        raise Failure(
            f"smoke failed: {', '.join(failed)}"
            + (f" (not run: {', '.join(skipped)})" if skipped else "")
            + f"; run {report.run_id}, {report.seconds:.1f}s"
        )
    echo(f"smoke passed: {len(CHECKS)} of {len(CHECKS)} checks, run {report.run_id}, {report.seconds:.1f}s", err=True)


def _clean_up(operator: Operator, run_id: str, *, as_json: bool) -> None:
    run = Smoke(Target.of(operator), run_id=run_id)
    removed = run.clean_up()
    check = _cleanup_check(removed, run_id)
    if as_json:
        echo(to_json({"run_id": run_id, "cleanup": check.as_dict()}))
    else:
        echo(f"smoke clean-up of run {run_id}: {check.detail}")
    if check.status != PASS:
        raise Failure(f"smoke clean-up of run {run_id} incomplete (see above)")
