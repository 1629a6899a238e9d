"""The explorer: every schedule of a scenario's actors within the bounds, each checked, on a fresh moto.

One execution: a fresh ``mock_aws`` world, the consumer and the reconciler configured with the
hooked clients, the actors driven by the scheduler; then the drain (the messages not acknowledged
or parked are delivered again, unless they were on their last receive; then the reconciler), then
the final invariants. A message on its last receive that its delivery does not acknowledge is
dead-lettered by SQS: into the world's DLQ when a redrive (:mod:`tests.verify.redrive`) may move it
back, at the delivery's end (its return or its crash, whose footprint then writes the DLQ); with no
redrive nothing reads the DLQ, and the drain counts it as dead-lettered.

The harness makes the consumer deterministic without changing its code: its worker pool runs each
job at submission (one thread per actor), its clocks are the harness's (the wall clock frozen, so
every pending record is older than the reconciler's threshold of 0 s; the monotonic clock of a
delivery is the time its calls cost; a transaction after a reconciler run's query is created a
second later, past that run's bound, as it is in time; the drain's reconciler runs later still),
and the reconciler runs without a deadline (its deadline
thread is covered by ``tests/reconciler/test_deadline.py``).
"""

from __future__ import annotations

import contextlib
import functools
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as consumer_handler
from idempotent_order_pipeline._lambda_asset.order_consumer import pipeline as pipeline_module
from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_handler
from idempotent_order_pipeline._lambda_asset.order_consumer import reconciliation as reconciliation_module
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciliation import Reconciler
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients as ConsumerClients
from idempotent_order_pipeline._lambda_asset.order_consumer.store import OrderStore
from idempotent_order_pipeline.sandbox import moto_patches
from tests.reliability.invariants import Message
from tests.verify import checks, redrive
from tests.verify.scenarios import Delivery, Scenario
from tests.verify.scheduler import (
    Bounds,
    Crash,
    Execution,
    Outcome,
    Point,
    Pruned,
    Transition,
    current_actor,
    explore,
)
from tests.verify.world import LATE_CREATED_AT, Clients, EmptyShards, LoggedCall, World

#: The frozen wall clock (epoch seconds): records are created at its whole second, the reconciler
#: runs half a second later, so every pending record is older than its threshold. A transaction
#: that runs after a reconciler run queried the index is created a second later
#: (``world.LATE_CREATED_AT``), and the drain's reconciler runs ``DRAIN_LATER_S`` later still.
FROZEN_NOW = 1_800_000_000.5
DRAIN_LATER_S = 10.0
assert int(FROZEN_NOW) + 1 == LATE_CREATED_AT < FROZEN_NOW + DRAIN_LATER_S


class _LambdaContext:
    """What Powertools reads of the Lambda context; no remaining time (no deadline)."""

    function_name = "order-pipeline"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:order-pipeline"
    aws_request_id = "explorer"


class _TimedContext(_LambdaContext):
    """A delivery's context: its remaining time is its budget less what its calls cost so far."""

    def __init__(self, world: World, actor: str, budget_ms: int) -> None:
        self._world, self._actor, self._budget_ms = world, actor, budget_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._budget_ms - self._world.clock_ms[self._actor]


class SynchronousExecutor:
    """The pipeline's worker pool, serialized: each job runs at submission, on the actor's thread."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class _Clock:
    """The pipeline's ``time`` module: a delivery's monotonic clock is the time its calls cost."""

    def __init__(self, world: Callable[[], World | None]) -> None:
        self._world = world

    def monotonic(self) -> float:
        world, actor = self._world(), current_actor()
        if world is None or actor is None:
            return time.monotonic()
        return world.clock_ms[actor] / 1000

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@dataclass
class Report:
    """What one scenario's exploration found."""

    scenario: str
    schedules: int = 0
    pruned: int = 0
    states: set[str] = field(default_factory=set)
    violation: Outcome | None = None
    trace: list[LoggedCall] = field(default_factory=list)
    bound_reached: bool = True
    seconds: float = 0.0
    #: Complete schedules in which a redrive moved a message back and the consumer received it again.
    redriven: int = 0

    def line(self) -> str:
        redriven = f", {self.redriven} of them with a message redriven" if self.redriven else ""
        return (
            f"{self.scenario}: {self.schedules} schedules{redriven} ({self.pruned} pruned as reorderings), "
            f"{len(self.states)} states, {'a violation' if self.violation else '0 violations'}, {self.seconds:.0f} s"
        )


class Harness:
    """The clients (made once), the patches that make the consumer deterministic, the current world."""

    def __init__(self) -> None:
        self.world: World | None = None
        self.clients: Clients | None = None
        self.call_checks: list[Callable[..., None]] = []

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        moto_patches.apply_partiql_fix()  # the marks are PartiQL statements (the stand-in's fix 7)
        with mock_aws(), contextlib.ExitStack() as stack:
            if self.clients is None:
                self.clients = Clients.make()
                World.install(self.clients, lambda: self.world)
            stack.enter_context(_patched(pipeline_module, "ThreadPoolExecutor", SynchronousExecutor))
            stack.enter_context(_patched(pipeline_module, "time", _Clock(lambda: self.world)))
            stack.enter_context(_patched_default(OrderStore.__init__, "clock", lambda: FROZEN_NOW))
            stack.enter_context(_patched_default(Reconciler.__init__, "clock", self._reconciler_clock))
            # moto's index has no propagation lag to allow for
            stack.enter_context(_patched(reconciliation_module, "INDEX_PROPAGATION_MARGIN_SECONDS", 0))
            try:
                yield
            finally:
                consumer_handler.configure()
                reconciler_handler.configure()
                self.world = None

    def _reconciler_clock(self) -> float:
        return FROZEN_NOW + (DRAIN_LATER_S if self.world is not None and self.world.draining else 0.0)

    # --- one execution -------------------------------------------------------------------------------

    def run_one(
        self,
        scenario: Scenario,
        bounds: Bounds,
        drive: Callable[[Execution], None],
        states: set[str],
        prepare: Callable[[World], None] | None = None,
    ) -> tuple[Outcome, World]:
        assert self.clients is not None
        if True:
            world = World(self.clients, fifo=scenario.fifo, event_ids=scenario.event_ids())
            self.world = world
            messages = scenario.messages()
            world.call_checks += [
                checks.marked_only_after_sns_accepted,
                checks.fifo_groups_commit_in_order(messages),
                checks.dead_letters_carry_their_reason(messages),
            ]
            world.call_checks += self.call_checks
            if prepare is not None:
                prepare(world)
            hooked = ConsumerClients(dynamodb=self.clients.dynamodb, sns=self.clients.sns, sqs=self.clients.sqs)
            consumer_handler.configure(hooked, world.env)
            reconciler_handler.configure(
                reconciler_handler.ReconcilerClients(
                    dynamodb=EmptyShards(self.clients.dynamodb, lambda: self.world),  # type: ignore[arg-type]
                    sns=self.clients.sns,
                ),
                {**world.env, "RECONCILE_AFTER_SECONDS": "0"},
            )
            execution = Execution(
                self._actors(scenario, world, messages), bounds, self._crash_footprints(scenario, world, messages)
            )
            world.execution = execution

            def after_move(move: Transition) -> None:
                try:
                    checks.state_now(world, messages, messages_redeliver=scenario.messages_redeliver)
                except AssertionError as exc:
                    world.violations.append(f"after {move}: {exc}")
                states.add(world.state_hash(tuple(m.acknowledged for m in messages)))

            execution.on_move = after_move

            def state_key() -> str | None:
                if world.violations:
                    return None  # finish this execution: it reports the violation
                histories = tuple((entry.actor, entry.call, entry.result) for entry in world.log)
                locals_ = (execution.local_states(), execution.crashes, execution.faults)
                by_actor = {name: [h for h in histories if h[0] == name] for name, *_ in locals_[0]}
                acks = tuple(m.acknowledged for m in messages)
                return world.state_hash((acks, repr(sorted(by_actor.items())), locals_))

            execution.state_key = state_key
            try:
                drive(execution)
            except Pruned:
                execution.join()
                return Outcome(list(execution.trace), complete=False), world
            execution.join()
            for name, (_, error, _) in execution.results().items():
                if error is not None:
                    world.violations.append(f"{name} failed: {''.join(traceback.format_exception(error))[-1500:]}")
            world.execution = None
            if not world.violations:
                try:
                    self._drain(scenario, world, messages)
                    checks.final(world, messages)
                except AssertionError as exc:
                    world.violations.append(f"after the drain: {exc}")
            violation = "\n".join(world.violations) if world.violations else None
            return Outcome(list(execution.trace), complete=True, violation=violation), world

    def _actors(self, scenario: Scenario, world: World, messages: list[Message]) -> list[tuple[str, Callable[[], Any]]]:
        actors: list[tuple[str, Callable[[], Any]]] = [
            (delivery.name, functools.partial(self._deliver, scenario, world, messages, delivery))
            for delivery in scenario.deliveries
        ]
        if scenario.reconciler:
            actors.append(("R", lambda: reconciler_handler.handler({}, _LambdaContext())))
        if scenario.ttl_expiry is not None:
            event_id = scenario.ttl_expiry

            def expire() -> None:
                assert world.execution is not None
                world.execution.point(
                    Point(f"TTL expiry of {event_id}", frozenset({(f"events:{event_id}", "w")}), crashable=False)
                )
                world.expire(event_id)

            actors.append(("TTL", expire))
        if scenario.redrive:
            actors.append(
                (
                    redrive.ACTOR,
                    redrive.actor(
                        scenario, world, messages, functools.partial(self._deliver, scenario, world, messages)
                    ),
                )
            )
        return actors

    @staticmethod
    def _dead_letters_at_the_end(scenario: Scenario) -> bool:
        """Whether a delivery's messages are on their last receive and dead-lettered into a DLQ a redrive reads."""
        return scenario.redrive and not scenario.messages_redeliver

    def _crash_footprints(
        self, scenario: Scenario, world: World, messages: Sequence[Message]
    ) -> dict[str, frozenset[tuple[str, str]]]:
        """A delivery's crash on its messages' last receive dead-letters them: it writes the DLQ."""
        if not self._dead_letters_at_the_end(scenario):
            return {}
        return {
            delivery.name: frozenset(
                {("queue:" + world.dlq_name, "w")} | {(f"msg:{messages[i].message_id}", "w") for i in delivery.messages}
            )
            for delivery in scenario.deliveries
        }

    def _deliver(self, scenario: Scenario, world: World, messages: list[Message], delivery: Delivery) -> None:
        batch = [messages[index] for index in delivery.messages]
        # A copy a redrive moved back has receives left: only the producer's messages may be on their last.
        last_receive = self._dead_letters_at_the_end(scenario) and delivery.name != redrive.ACTOR
        try:
            acknowledged = self._invoke(scenario, world, messages, delivery, batch, last_receive)
        except Crash:
            if last_receive:
                self._dead_letter(scenario, world, batch)
            raise
        try:
            checks.returned_before_the_deadline(world, delivery.name, delivery.budget_ms)
            checks.acknowledged_ones_are_sent_or_parked(world, delivery.name, acknowledged)
        except AssertionError as exc:
            world.violations.append(f"at {delivery.name}'s return: {exc}")
        for message in acknowledged:
            message.acknowledged = True
        if last_receive:
            self._dead_letter(scenario, world, batch)

    @staticmethod
    def _invoke(
        scenario: Scenario,
        world: World,
        messages: list[Message],
        delivery: Delivery,
        batch: list[Message],
        last_receive: bool,
    ) -> list[Message]:
        """The handler's invocation and its return (a point): the messages it acknowledges."""
        context = _TimedContext(world, delivery.name, delivery.budget_ms)
        response = consumer_handler.handler({"Records": scenario.batch(messages, delivery)}, context)
        failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
        acknowledged = [m for m in batch if m.message_id not in failed]
        footprint = {(f"events:{m.event_id}", "r") for m in batch} | {(f"msg:{m.message_id}", "w") for m in batch}
        dlq = ("queue:" + world.dlq_name, "w" if last_receive else "r")
        label = f"return, acknowledging {[m.message_id for m in acknowledged]}"
        assert world.execution is not None
        world.execution.point(Point(label, frozenset(footprint | {dlq})))
        world.log.append(LoggedCall(delivery.name, "return", f"acknowledged {[m.message_id for m in acknowledged]}"))
        return acknowledged

    @staticmethod
    def _dead_letter(scenario: Scenario, world: World, batch: Sequence[Message]) -> None:
        """SQS's redrive policy: each message of the batch no delivery acknowledged goes to the DLQ as it is."""
        for message in batch:
            if not (message.acknowledged or message.redriven):
                world.dead_letter(message.record, scenario.queue_arn)
                message.redriven = True
                world.log.append(LoggedCall("SQS", f"dead-letter {message.message_id}", "moved to the DLQ"))

    def _drain(self, scenario: Scenario, world: World, messages: Sequence[Message]) -> None:
        """Deliver again what is neither acknowledged nor parked (or drop it, on its last receive); reconcile."""
        world.log.append(LoggedCall("-", "drain", "the harness redelivers, then reconciles"))
        world.draining = True
        for _ in range(5):
            parked = world.parked()
            left = [m for m in messages if not m.acknowledged and m.message_id not in parked and not m.redriven]
            if not scenario.messages_redeliver:
                for message in left:
                    if message.message_id not in world.origins:  # a redrive's copy has receives left
                        message.redriven = True  # moved to the DLQ by the redrive policy, and the DLQ dropped
                left = [m for m in left if not m.redriven]
            if not left:
                break
            response = consumer_handler.handler({"Records": [m.record for m in left]}, _LambdaContext())
            failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
            acknowledged = [m for m in left if m.message_id not in failed]
            checks.acknowledged_ones_are_sent_or_parked(world, "drain", acknowledged)
            for message in acknowledged:
                message.acknowledged = True
        for _ in range(3):
            if not any(r["status"] == "pending" for r in world.records().values()):
                break
            reconciler_handler.handler({}, _LambdaContext())
        if world.violations:
            raise AssertionError("; ".join(world.violations))

    # --- a whole scenario ------------------------------------------------------------------------------

    def explore(
        self,
        scenario: Scenario,
        bounds: Bounds,
        *,
        limit: int | None = None,
        prepare: Callable[[World], None] | None = None,
    ) -> Report:
        report = Report(scenario.name)
        started = time.monotonic()
        last_world: list[World] = []

        def run(drive: Callable[[Execution], None]) -> Outcome:
            outcome, world = self.run_one(scenario, bounds, drive, report.states, prepare)
            last_world[:] = [world]
            return outcome

        for outcome in explore(run, limit=limit):
            if outcome.complete:
                report.schedules += 1
                report.redriven += bool(last_world[0].origins)
            else:
                report.pruned += 1
            if outcome.violation is not None:
                report.violation = outcome
                report.trace = list(last_world[0].log)
        report.bound_reached = limit is None or report.schedules + report.pruned < limit or report.violation is None
        report.seconds = time.monotonic() - started
        return report

    def replay(
        self, scenario: Scenario, bounds: Bounds, schedule: str, prepare: Callable[[World], None] | None = None
    ) -> tuple[Outcome, World]:
        """One execution following ``schedule`` (moves as printed, separated by spaces)."""
        wanted = schedule.split()

        def drive(execution: Execution) -> None:
            execution.start()
            for move in wanted:
                possible = {str(option): option for option in execution.enabled()}
                assert move in possible, f"{move} is not possible here; possible: {sorted(possible)}"
                execution.take(possible[move])
            # then every actor runs to its end, its call taken at each point
            while rest := execution.enabled():
                execution.take(next(o for o in rest if o.action == "call"))

        return self.run_one(scenario, bounds, drive, set(), prepare)


def schedule_text(outcome: Outcome) -> str:
    return " ".join(str(move) for move in outcome.schedule)


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


@contextlib.contextmanager
def _patched_default(function: Any, name: str, value: Any) -> Iterator[None]:
    """A keyword-only default of ``function`` replaced (the injectable clock the composition root leaves default)."""
    defaults = dict(function.__kwdefaults__)
    function.__kwdefaults__ = {**defaults, name: value}
    try:
        yield
    finally:
        function.__kwdefaults__ = defaults


__all__ = ["Crash", "Harness", "Report", "schedule_text"]
