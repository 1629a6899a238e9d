"""Property-based chaos: producers, consumers, faults and SQS semantics interleaved by hypothesis.

The state machine models the SQS queue (visibility, ApproximateReceiveCount, a redrive policy
moving a message to the DLQ after MAX_RECEIVES receives) and drives the real handler, in process,
on moto. Faults are armed at the AWS client boundary (crash before a call or after it succeeded,
transient cancellations, a throttled sent mark, an SNS outage). The previous release, 0.2.0 as
released (``tests/compat/v0_2_0/``), consumes some deliveries too, alone or racing the current one
(the seconds of a deploy, or a rollback), in a child process on the same moto state (served over
HTTP), with SNS up or down for it. After every step the invariants that must hold at all times are
checked; at the end the queue is drained with faults disarmed and the final ones are checked.

Budget: HYPOTHESIS_PROFILE=ci (the default, in ``make test``) or ``reliability`` (``make reliability``).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.config import Settings
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciler import ReconcilerClients, build_reconciler
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients, build_pipeline
from tests.compat.released import V0_2_0, ReleasedFunctions, moto_server
from tests.consumer.harness import (
    ArmedFault,
    CancellationFor,
    Crash,
    World,
    cancelled_for,
    client_error,
    refuse_entries,
    refuse_statements,
    sqs_record,
)
from tests.reconciler.harness import add_pending_index
from tests.reliability import invariants
from tests.reliability.invariants import Message, describe

# Stateful chaos: generated scenarios of producers, consumers and faults.
pytestmark = pytest.mark.slow

MAX_RECEIVES = 4
MAX_BATCH = 10

settings.register_profile(
    "ci",
    # make test's share: 100 scenarios of 20 steps (about 40 CPU-s on the development machine; 200 took
    # 85 of make test's budget). make reliability runs the same machine on 10,000.
    max_examples=100,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "reliability",
    # RELIABILITY_EXAMPLES shortens (or lengthens) the long run, e.g. for a run on a changed consumer.
    max_examples=int(os.environ.get("RELIABILITY_EXAMPLES", "10000")),
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")

INVALID_BODIES = ["not json", "[]", "{}", '{"order_id": ""}', '{"order_id": "x", "n": NaN}', '{"order_id": 1}']

_ids = itertools.count()


@dataclass
class Stats:
    """Totals across all examples, printed by ``make reliability``."""

    examples: int = 0
    steps: int = 0
    messages: int = 0
    crashes: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    redriven: int = 0
    reconciled: int = 0
    #: Consumer steps 0.2.0 took (alone, or racing the current consumer).
    previous_version_steps: int = 0


STATS = Stats()


_shared: dict[str, Any] = {}
# What 0.2.0's functions are configured with before the first example configures its own.
_PLACEHOLDER_ENVIRONMENT = {
    "PROCESSED_EVENTS_TABLE": "none",
    "ORDER_RECORDS_TABLE": "none",
    "TOPIC_ARN": "arn:aws:sns:eu-west-1:123456789012:none",
    "DEAD_LETTER_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/none",
}


@pytest.fixture(scope="module", autouse=True)
def shared_moto() -> Iterator[None]:
    """One moto backend and one set of boto3 clients for all examples (each example has its own resources),
    and 0.2.0's functions in one child process on that backend."""
    # One lock for every example's in-process clients and the server's requests (see moto_server).
    _shared["lock"] = threading.RLock()
    with mock_aws(), moto_server(_shared["lock"]) as url:
        _shared["aws"] = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        _shared["v0_2_0"] = ReleasedFunctions(V0_2_0, url, _PLACEHOLDER_ENVIRONMENT)
        try:
            yield
        finally:
            _shared["v0_2_0"].close()
    _shared.clear()


@dataclass
class SnsRefusal:
    """SNS refuses one entry (``position`` modulo the call's size) of each of the next ``times`` PublishBatch calls."""

    times: int
    position: int

    def rewrite(self, request: dict[str, Any], send: Callable[..., Any]) -> Any:
        entries = request["PublishBatchRequestEntries"]
        if self.times <= 0:
            return send(**request)
        self.times -= 1
        victim = entries[self.position % len(entries)]["Id"]
        return refuse_entries(lambda entry: entry["Id"] == victim)(request, send)


@dataclass
class MarkStatementThrottled:
    """DynamoDB answers one statement (``position`` modulo the call's size) of each of the next ``times``
    BatchExecuteStatement calls with ThrottlingError, and runs the others."""

    times: int
    position: int

    def rewrite(self, request: dict[str, Any], send: Callable[..., Any]) -> Any:
        statements = request["Statements"]
        if self.times <= 0:
            return send(**request)
        self.times -= 1
        victim = statements[self.position % len(statements)]
        return refuse_statements(lambda statement: statement is victim)(request, send)


Fault = ArmedFault | SnsRefusal | MarkStatementThrottled


def fault_strategy() -> st.SearchStrategy[Fault | None]:
    crash = st.builds(
        lambda k, after: ArmedFault(Crash("chaos"), at=k, after_success=after), st.integers(1, 24), st.booleans()
    )
    cancellation = st.builds(
        # one record's item of the transaction cancelled (the others: asked again without it)
        lambda code, times, position: ArmedFault(
            cancelled_for(position, code, "None"), "transact_write_items", times=times
        ),
        st.sampled_from(["TransactionConflict", "ThrottlingError"]),
        st.integers(1, 3),
        st.integers(0, 9),
    )
    mark_throttled = st.builds(
        lambda times: ArmedFault(
            client_error("BatchExecuteStatement", "ThrottlingException"), "batch_execute_statement", times=times
        ),
        st.integers(1, 6),
    )
    mark_statement_throttled = st.builds(MarkStatementThrottled, st.integers(1, 3), st.integers(0, 9))
    sns_outage = st.builds(
        lambda times: ArmedFault(client_error("PublishBatch", "InternalError"), "publish_batch", times=times),
        st.integers(1, 6),
    )
    sns_refusal = st.builds(SnsRefusal, st.integers(1, 3), st.integers(0, 9))
    return st.one_of(st.none(), crash, cancellation, mark_throttled, mark_statement_throttled, sns_outage, sns_refusal)


def fault_name(fault: Fault) -> str:
    if isinstance(fault, SnsRefusal):
        return "sns-refuses-an-entry"
    if isinstance(fault, MarkStatementThrottled):
        return "mark-statement-throttled"
    if isinstance(fault.error, Crash):
        return "crash-after-success" if fault.after_success else "crash-before-call"
    if fault.operation == "publish_batch":
        return "sns-outage"
    if fault.operation == "batch_execute_statement":
        return "mark-throttled"
    if isinstance(fault.error, CancellationFor):
        return fault.error.codes[0]
    return str(getattr(fault.error, "response", {}).get("CancellationReasons", [{}])[0].get("Code"))


class OrderPipelineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        STATS.examples += 1
        self.world = World(aws=_shared["aws"], prefix=f"x{STATS.examples}-")
        self.world.board.lock = _shared["lock"]  # shared with 0.2.0's requests (see shared_moto)
        self.previous: ReleasedFunctions = _shared["v0_2_0"]
        self.previous_sns_down: bool | None = None  # what 0.2.0 is configured with (None: another example's)
        add_pending_index(self.world.dynamodb, self.world.events_table)
        self.other = build_pipeline(Settings.from_env(self.world.env), self.world.clients)
        self.messages: list[Message] = []

    def teardown(self) -> None:
        try:
            self.drain_and_check()
        finally:
            handler_module.configure()
            self.other.close()

    # --- producers -------------------------------------------------------------------------------

    def _send(self, body: str, key: str | None = None) -> None:
        record = sqs_record(body, key=key)
        described = describe(body, key)
        message = Message(record=record, valid=described is not None)
        if described:
            message.event_id, message.order_id, message.sha = described
        self.messages.append(message)
        STATS.messages += 1

    @initialize(n=st.integers(1, 4))
    def seed_orders(self, n: int) -> None:
        for _ in range(n):
            self.send_new(amount=1, use_attribute=False)

    @rule(amount=st.integers(0, 3), use_attribute=st.booleans())
    def send_new(self, amount: int, use_attribute: bool) -> None:
        number = next(_ids)
        order = {"order_id": f"o-{number}", "amount": amount}
        if use_attribute:
            self._send(json.dumps(order), key=f"evt-{number}")
        else:
            self._send(json.dumps({**order, "event_id": f"evt-{number}"}))

    @precondition(lambda self: bool(self.messages))
    @rule(data=st.data())
    def resend(self, data: st.DataObject) -> None:
        """The producer re-sends a message: new message id, same body and key."""
        original = data.draw(st.sampled_from(self.messages))
        key = original.record["messageAttributes"].get("idempotency_key", {}).get("stringValue")
        self._send(original.record["body"], key=key)

    @precondition(lambda self: any(m.valid for m in self.messages))
    @rule(data=st.data(), same_event=st.booleans())
    def send_conflicting(self, data: st.DataObject, same_event: bool) -> None:
        """Same key with another payload, or the same order under a new key with another payload."""
        original = data.draw(st.sampled_from([m for m in self.messages if m.valid]))
        event_id = original.event_id if same_event else f"evt-{next(_ids)}"
        self._send(json.dumps({"order_id": original.order_id, "event_id": event_id, "amount": 100 + next(_ids)}))

    @rule(body=st.sampled_from(INVALID_BODIES))
    def send_invalid(self, body: str) -> None:
        self._send(body)

    # --- SQS and consumers -----------------------------------------------------------------------

    def _receive(self, size: int) -> list[Message]:
        batch: list[Message] = []
        for message in self.messages:
            if len(batch) == size:
                break
            if message.acknowledged or message.redriven or message.in_flight:
                continue
            if message.receives >= MAX_RECEIVES:  # SQS's redrive policy moves it to the DLQ
                message.redriven = True
                STATS.redriven += 1
                continue
            message.receives += 1
            message.in_flight = True
            message.record["attributes"]["ApproximateReceiveCount"] = str(message.receives)
            batch.append(message)
        return batch

    def _settle(self, batch: list[Message], failed: set[str]) -> None:
        for message in batch:
            if message.record["messageId"] not in failed:
                message.acknowledged = True  # deleted from the queue

    def _invoke(self, batch: list[Message]) -> None:
        try:
            response = self.world.invoke([m.record for m in batch])
        except Crash:
            STATS.crashes += 1
            return  # the invocation died: the whole batch reappears after the visibility timeout
        self._settle(batch, self.world.failures(response))

    def _arm(self, fault: Fault | None) -> None:
        if isinstance(fault, SnsRefusal):
            self.world.board.rewrites["publish_batch"] = fault.rewrite
        elif isinstance(fault, MarkStatementThrottled):
            self.world.board.rewrites["batch_execute_statement"] = fault.rewrite
        elif fault is not None:
            self.world.board.arm(fault)
        if fault is not None:
            STATS.faults[fault_name(fault)] += 1

    @rule(size=st.integers(1, MAX_BATCH), fault=fault_strategy())
    def consume(self, size: int, fault: Fault | None) -> None:
        """A consumer receives a batch, with a fault armed somewhere in its AWS calls (or none)."""
        self._arm(fault)
        batch = self._receive(size)
        if batch:
            self._invoke(batch)
            STATS.steps += 1
        self.check_invariants_now()

    @rule(size=st.integers(1, MAX_BATCH), fault=fault_strategy())
    def consume_twice_concurrently(self, size: int, fault: Fault | None) -> None:
        """Two consumers get the same batch (a visibility timeout expired mid-flight) and race."""
        self._arm(fault)
        batch = self._receive(size)
        if not batch:
            return
        STATS.steps += 1
        outcome: dict[str, Any] = {}

        def second() -> None:
            try:
                outcome["results"] = self.other.process_batch([m.record for m in batch])
            except Crash:
                outcome["crashed"] = True

        thread = threading.Thread(target=second)
        thread.start()
        self._invoke(batch)
        thread.join()
        if "results" in outcome:
            self._settle(batch, {r.message_id for r in outcome["results"] if r.failed})
        self.check_invariants_now()

    def _previous_version(self, *, sns_down: bool) -> ReleasedFunctions:
        """0.2.0's consumer on this example's resources; ``sns_down``: its topic does not exist (publishes fail)."""
        if self.previous_sns_down != sns_down:
            topic = self.world.topic_arn + ("-gone" if sns_down else "")
            self.previous.configure({**self.world.env, "TOPIC_ARN": topic})
            self.previous_sns_down = sns_down
        return self.previous

    def _settle_previous(self, batch: list[Message], response: dict[str, Any]) -> None:
        if "error" in response:  # the invocation failed: the whole batch reappears
            return
        self._settle(batch, {failure["itemIdentifier"] for failure in response["batchItemFailures"]})

    @rule(size=st.integers(1, MAX_BATCH), sns_down=st.booleans())
    def previous_version_consumes(self, size: int, sns_down: bool) -> None:
        """0.2.0 (a rollback, or a deploy not finished) receives a batch."""
        previous = self._previous_version(sns_down=sns_down)
        batch = self._receive(size)
        if batch:
            self._settle_previous(batch, previous.invoke([m.record for m in batch]))
            STATS.steps += 1
            STATS.previous_version_steps += 1
        self.check_invariants_now()

    @rule(size=st.integers(1, MAX_BATCH), fault=fault_strategy(), sns_down=st.booleans())
    def both_versions_consume_concurrently(self, size: int, fault: Fault | None, sns_down: bool) -> None:
        """During a deploy, the current consumer and 0.2.0 get the same batch and race."""
        previous = self._previous_version(sns_down=sns_down)
        self._arm(fault)
        batch = self._receive(size)
        if not batch:
            return
        STATS.steps += 1
        STATS.previous_version_steps += 1
        outcome: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: outcome.update(response=previous.invoke([m.record for m in batch])))
        thread.start()
        self._invoke(batch)
        thread.join()
        self._settle_previous(batch, outcome["response"])
        self.check_invariants_now()

    @rule()
    def visibility_timeout_expires(self) -> None:
        for message in self.messages:
            message.in_flight = False

    # --- invariants (checked after every consumer step: producer steps do not touch AWS) ----------

    def check_invariants_now(self) -> None:
        self.recorded_events_own_their_rows_and_sent_ones_were_published()
        self.every_row_has_a_state_record()

    def recorded_events_own_their_rows_and_sent_ones_were_published(self) -> None:
        invariants.recorded_events_own_their_rows_and_sent_ones_were_published(
            self.world.event_records(), self.world.order_rows(), self.world.notified_events()
        )

    def every_row_has_a_state_record(self) -> None:
        # no TTL expiry in this model
        invariants.every_row_has_a_state_record(self.world.event_records(), self.world.order_rows())

    # --- the end -----------------------------------------------------------------------------------

    def drain_and_check(self) -> None:
        self.world.board.disarm()
        for _ in range(3 * MAX_RECEIVES + 10):
            self.visibility_timeout_expires()
            batch = self._receive(MAX_BATCH)
            if not batch and all(m.acknowledged or m.redriven for m in self.messages):
                break
            if batch:
                self._invoke(batch)
        assert all(m.acknowledged or m.redriven for m in self.messages), "queue did not drain"
        dropped = self.world.dead_letters()  # read, then gone: the DLQ is dropped without a redrive
        if any(record["status"] == "pending" for record in self.world.event_records().values()):
            self.reconcile_until_done()  # (a run over an index with nothing pending changes nothing)

        observed = invariants.Observed(
            records=self.world.event_records(),
            rows=self.world.order_rows(),
            notified=self.world.notified_events(),
            parked=invariants.parked_reasons(dropped),
        )
        invariants.final_state(self.messages, observed)

    def reconcile_until_done(self) -> None:
        """The scheduled reconciler (threshold 0 once everything has drained), run until a run ends clean."""
        reconciler = build_reconciler(
            {**self.world.env, "RECONCILE_AFTER_SECONDS": "0"},
            ReconcilerClients(dynamodb=self.world.dynamodb, sns=self.world.sns),
        )
        for _ in range(5):
            report = reconciler.run()
            STATS.reconciled += report.reconciled
            if report.complete and report.left_pending == 0 and not report.errors:
                return
        raise AssertionError(f"the reconciler did not finish: {report.as_dict()}")


OrderPipelineMachine.TestCase.settings = settings.get_profile(PROFILE)
TestOrderPipeline = OrderPipelineMachine.TestCase
