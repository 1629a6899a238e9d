"""What makes every deployed function live: Lambda's pollers and EventBridge's scheduler, on the endpoint.

The stand-in (:mod:`.standin`) runs one :class:`Supervisor`. Every ``interval`` seconds it reads
what is deployed, the way Lambda's control plane would:

* every SQS event source mapping (``ListEventSourceMappings``) that is enabled gets a
  :class:`MappingWorker`: the function's code (the zip ``cdk deploy`` uploaded, unpacked once per
  ``CodeSha256``), its layers, the interpreter of its runtime (:class:`~.runtimes.Runtimes`: the
  runtime's own Python when this machine has one), ``concurrency`` execution environments
  (:class:`~.lambda_runtime.FunctionProcess`) and a poller (:class:`~.poller.SqsPoller`) with the
  mapping's own batch size, batching window and ``ReportBatchItemFailures``;
* every enabled EventBridge rule with a ``rate(...)`` schedule whose target is a function gets a
  :class:`ScheduleWorker` that invokes it with a scheduled event on that rate.

A worker is keyed by its mapping (or rule and target) and remembers what it was built from: the
mapping's settings and the function's ``CodeSha256`` and ``LastModified``. When any of them changes
(a redeploy with new code, a new environment variable, a new batch size) the worker is replaced;
when the mapping or rule is gone (the stack was deleted) or disabled, it is stopped. A function the
stand-in cannot run (a layer it does not hold, code it cannot find) is reported once in the log
and in the status, and tried again when its deployment changes.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from idempotent_order_pipeline.core.schedule import rate_seconds
from idempotent_order_pipeline.sandbox.chaos import RandomCrashes
from idempotent_order_pipeline.sandbox.deploy import Layer
from idempotent_order_pipeline.sandbox.function import (
    CONSUMER_HANDLER,
    DeployedFunction,
    QueueMapping,
    queue_mapping,
    read_function,
)
from idempotent_order_pipeline.sandbox.lambda_runtime import FunctionProcess
from idempotent_order_pipeline.sandbox.poller import DEFAULT_VISIBILITY_TIMEOUT_SECONDS, CrashPlan, SqsPoller
from idempotent_order_pipeline.sandbox.runtimes import FunctionRuntime, Runtimes
from idempotent_order_pipeline.sandbox.server import Endpoint

#: Seconds between two reads of the deployed mappings and schedules.
DEFAULT_INTERVAL_SECONDS = 1.0
#: Execution environments per mapping (Lambda would scale this; 2 suits a laptop).
DEFAULT_CONCURRENCY = 2
#: Schedules are read every this many intervals (rules change only with a deploy).
SCHEDULE_EVERY_INTERVALS = 5

Log = Callable[[str], None]


@dataclass(frozen=True)
class SupervisorOptions:
    """How the stand-in runs what is deployed."""

    concurrency: int = DEFAULT_CONCURRENCY
    #: The visibility timeout of a received batch: how soon a failed batch comes back.
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT_SECONDS
    #: Chaos (``make demo``): share of the pipeline consumer's invocations that crash, and the plan's
    #: seed; 0 = none. Only the consumer's (handler :data:`.function.CONSUMER_HANDLER`): the stand-in brings a
    #: crashed batch back after ``visibility_timeout``, sooner than the queue would, and an
    #: ``IdempotentSubscriber`` then finds its crashed copy's claim still within its lease (the
    #: function timeout) and fails until the queue parks the notification (real Lambda waits out the
    #: queue's visibility timeout, longer than the lease).
    crash_rate: float = 0.0
    seed: int = 0
    interval: float = DEFAULT_INTERVAL_SECONDS


def scheduled_event(rule_arn: str, region: str, account: str) -> dict[str, Any]:
    """The event EventBridge sends a scheduled target."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


def crash_plan(function: DeployedFunction, mapping: QueueMapping, options: SupervisorOptions) -> CrashPlan | None:
    """The chaos plan of a mapping: crashes for the consumer's, with ``crash_rate``; none for any other."""
    if options.crash_rate > 0 and function.handler == CONSUMER_HANDLER:
        return RandomCrashes(options.crash_rate, options.seed, max_receive_count=mapping.max_receive_count)
    return None


class _Environments:
    """A function's code unpacked (once per CodeSha256) and its execution environments."""

    def __init__(
        self, function: DeployedFunction, endpoint: Endpoint, work_dir: Path, count: int, runtime: FunctionRuntime
    ) -> None:
        code_dir = work_dir / "functions" / function.name / _sha_dir(function.code_sha256)
        task_dir, layer_dirs = function.unpack(code_dir)
        logs = work_dir / "logs"
        self.function = function
        self.runtime = runtime
        self.processes = [
            FunctionProcess(function, endpoint, task_dir, layer_dirs, logs / f"{function.name}-{index}.log", runtime)
            for index in range(count)
        ]

    def stop(self) -> None:
        for process in self.processes:
            process.stop()

    def status(self) -> list[dict[str, Any]]:
        package = self.function.handler.partition(".")[0]
        return [{"pid": process.pid, "handler_from": process.loaded_modules.get(package)} for process in self.processes]

    def interpreter(self) -> dict[str, Any]:
        """Which interpreter runs the function, for its runtime (``line``: what ``sandbox status`` prints)."""
        return self.runtime.choice.as_dict(self.function.name)


def _sha_dir(code_sha256: str) -> str:
    return code_sha256.rstrip("=").replace("/", "_").replace("+", "-")


class MappingWorker:
    """One enabled SQS event source mapping, live: its function's environments fed by a poller."""

    def __init__(
        self,
        endpoint: Endpoint,
        mapping: QueueMapping,
        function: DeployedFunction,
        work_dir: Path,
        options: SupervisorOptions,
        runtime: FunctionRuntime,
    ) -> None:
        self.mapping = mapping
        self.function = function
        self._environments = _Environments(function, endpoint, work_dir, options.concurrency, runtime)
        self.poller = SqsPoller(
            endpoint,
            mapping,
            self._environments.processes,
            visibility_timeout=options.visibility_timeout,
            crash_plan=crash_plan(function, mapping, options),
            stop_on_unexpected_error=False,
        )
        self.poller.start()

    def stop(self) -> None:
        self.poller.stop()
        self._environments.stop()

    def status(self) -> dict[str, Any]:
        stats = self.poller.stats
        return {
            "uuid": self.mapping.uuid,
            "function": self.function.name,
            "handler": self.function.handler,
            "runtime": self.function.runtime,
            "interpreter": self._environments.interpreter(),
            "code_sha256": self.function.code_sha256,
            "queue": self.mapping.queue_url,
            "batch_size": self.mapping.batch_size,
            "batching_window_seconds": self.mapping.batching_window_seconds,
            "report_batch_item_failures": self.mapping.reports_batch_item_failures,
            "fifo": self.mapping.fifo,
            "max_receive_count": self.mapping.max_receive_count,
            "invocations": stats.invocations,
            "cold_starts": stats.cold_starts,
            "records_received": stats.records_received,
            "records_deleted": stats.records_deleted,
            "records_reported_failed": stats.records_reported_failed,
            "crashes_injected": stats.crashes_injected,
            "poller_errors": stats.poller_errors,
            "last_poller_error": self.poller.last_poller_error,
            "in_flight": stats.in_flight,
            "function_errors": dict(stats.function_errors),
            "unexpected_errors": [
                f"{error.error_type}: {error.message[:300]}" for error in stats.unexpected_errors[:5]
            ],
            "environments": self._environments.status(),
        }


class ScheduleWorker:
    """One scheduled rule target that is a function: invoked every ``period`` seconds."""

    def __init__(
        self,
        endpoint: Endpoint,
        rule_arn: str,
        period: int,
        event_input: str | None,
        function: DeployedFunction,
        work_dir: Path,
        log: Log,
        runtime: FunctionRuntime,
    ) -> None:
        self.rule_arn = rule_arn
        self.period = period
        self.function = function
        self.invocations = 0
        self.errors: list[str] = []
        self._endpoint = endpoint
        self._input = event_input
        self._log = log
        self._environments = _Environments(function, endpoint, work_dir, 1, runtime)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"schedule-{function.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        account, region = self.rule_arn.split(":")[4], self.rule_arn.split(":")[3]
        while not self._stop.wait(self.period):
            event = json.loads(self._input) if self._input else scheduled_event(self.rule_arn, region, account)
            invocation = self._environments.processes[0].invoke(event)
            self.invocations += 1
            if invocation.error is not None:
                message = f"{invocation.error.error_type}: {invocation.error.message[:300]}"
                self.errors = [*self.errors[-4:], message]
                self._log(f"scheduled {self.function.name}: {message}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._environments.stop()

    def status(self) -> dict[str, Any]:
        return {
            "rule": self.rule_arn,
            "function": self.function.name,
            "runtime": self.function.runtime,
            "interpreter": self._environments.interpreter(),
            "code_sha256": self.function.code_sha256,
            "every_seconds": self.period,
            "invocations": self.invocations,
            "errors": list(self.errors),
            "environments": self._environments.status(),
        }


Worker = MappingWorker | ScheduleWorker


class Supervisor:
    """Keeps one worker per enabled SQS mapping and per scheduled function target, as deployed."""

    def __init__(
        self,
        endpoint: Endpoint,
        work_dir: Path,
        published: Mapping[str, Layer],
        options: SupervisorOptions | None = None,
        log: Log | None = None,
        runtimes: Runtimes | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.options = options or SupervisorOptions()
        #: The interpreter of each runtime and the SDK beside it.
        self.runtimes = runtimes or Runtimes(work_dir)
        self._work_dir = work_dir
        self._published = dict(published)
        self._log = log or (lambda message: None)
        self._workers: dict[str, tuple[tuple[Any, ...], Worker]] = {}
        #: Deployments the stand-in cannot run: key -> (signature, why), reported once per signature.
        self._problems: dict[str, tuple[tuple[Any, ...], str]] = {}
        self._rounds = 0
        self._round_started = 0.0
        # One client per service for every round: a new one (its own boto3 session, models, endpoint
        # rules) costs about 130 ms of CPU, and the rounds alone made an idle stand-in take a quarter
        # of a core. Only the supervisor's thread uses them.
        self._lambda = endpoint.client("lambda")
        self._events = endpoint.client("events")

    def run(self, stop: threading.Event, on_round: Callable[[], None] | None = None) -> None:
        """Reconcile with what is deployed every ``interval`` seconds until ``stop`` is set."""
        try:
            while not stop.is_set():
                self.reconcile()
                if on_round is not None:
                    on_round()
                stop.wait(self.options.interval)
        finally:
            self.close()

    def reconcile(self) -> None:
        """One round: start, replace and stop workers to match the deployed mappings and schedules."""
        self._round_started = time.time()
        wanted: dict[str, tuple[tuple[Any, ...], Callable[[], Worker]]] = {}
        try:
            wanted |= self._wanted_mappings()
            if self._rounds % SCHEDULE_EVERY_INTERVALS == 0:
                wanted |= self._wanted_schedules()
            else:  # keep the schedules (and their problems) as they are between two reads
                kept = [*self._workers.items(), *self._problems.items()]
                wanted |= {key: (signature, _never) for key, (signature, _) in kept if key.startswith("r:")}
        except Exception as exc:  # the endpoint failed us: try again next round
            self._log(f"could not read the deployed mappings: {type(exc).__name__}: {exc}")
            return
        finally:
            self._rounds += 1
        for key in [key for key in self._workers if key not in wanted]:
            _, worker = self._workers.pop(key)
            self._log(f"stopped {_describe(worker)}: its mapping or schedule is gone or disabled")
            worker.stop()
        for key in [key for key in self._problems if key not in wanted]:
            del self._problems[key]
        for key, (signature, build) in wanted.items():
            current = self._workers.get(key)
            if current is not None and current[0] == signature:
                continue
            problem = self._problems.get(key)
            if problem is not None and problem[0] == signature:
                continue
            if current is not None:
                self._workers.pop(key)
                current[1].stop()
            try:
                worker = build()
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                self._problems[key] = (signature, why)
                self._log(f"cannot run {key}: {why}")
                continue
            self._problems.pop(key, None)
            self._workers[key] = (signature, worker)
            self._log(f"{'replaced' if current is not None else 'started'} {_describe(worker)}")

    def _function_signature(self, lambda_client: Any, function_arn: str) -> tuple[Any, ...] | None:
        try:
            config = lambda_client.get_function_configuration(FunctionName=function_arn)
        except lambda_client.exceptions.ResourceNotFoundException:
            return None
        return (config["CodeSha256"], config.get("LastModified"))

    def _wanted_mappings(self) -> dict[str, tuple[tuple[Any, ...], Callable[[], Worker]]]:
        client = self._lambda
        wanted: dict[str, tuple[tuple[Any, ...], Callable[[], Worker]]] = {}
        for page in client.get_paginator("list_event_source_mappings").paginate():
            for mapping in page["EventSourceMappings"]:
                if not str(mapping.get("EventSourceArn", "")).startswith("arn:aws:sqs:"):
                    continue
                if mapping.get("State", "Enabled") not in ("Enabled", "Enabling", "Creating", "Updating"):
                    continue
                function = self._function_signature(client, mapping["FunctionArn"])
                if function is None:
                    continue  # a mapping left behind by a deleted function: nothing to run
                settings = (
                    mapping["EventSourceArn"],
                    mapping["FunctionArn"],
                    mapping.get("BatchSize"),
                    mapping.get("MaximumBatchingWindowInSeconds"),
                    tuple(mapping.get("FunctionResponseTypes") or ()),
                )
                wanted[f"m:{mapping['UUID']}"] = (settings + function, _bind(self._build_mapping, dict(mapping)))
        return wanted

    def _wanted_schedules(self) -> dict[str, tuple[tuple[Any, ...], Callable[[], Worker]]]:
        events, client = self._events, self._lambda
        wanted: dict[str, tuple[tuple[Any, ...], Callable[[], Worker]]] = {}
        for page in events.get_paginator("list_rules").paginate():
            for rule in page["Rules"]:
                expression = rule.get("ScheduleExpression")
                if not expression or rule.get("State") != "ENABLED":
                    continue
                targets = events.list_targets_by_rule(
                    Rule=rule["Name"], EventBusName=rule.get("EventBusName", "default")
                )
                for target in targets["Targets"]:
                    if ":lambda:" not in target["Arn"] or ":function:" not in target["Arn"]:
                        continue
                    function = self._function_signature(client, target["Arn"])
                    if function is None:
                        continue
                    key = f"r:{rule['Arn']}/{target['Id']}"
                    signature = (expression, target["Arn"], target.get("Input"), *function)
                    wanted[key] = (signature, _bind(self._build_schedule, rule["Arn"], expression, dict(target)))
        return wanted

    def _build_mapping(self, mapping: Mapping[str, Any]) -> Worker:
        queue = queue_mapping(self.endpoint, mapping)
        function = read_function(self.endpoint, str(mapping["FunctionArn"]), self._published)
        runtime = self.runtimes.for_runtime(function.runtime)
        return MappingWorker(self.endpoint, queue, function, self._work_dir, self.options, runtime)

    def _build_schedule(self, rule_arn: str, expression: str, target: Mapping[str, Any]) -> Worker:
        period = rate_seconds(expression)
        if period is None:
            raise ValueError(f"schedule {expression!r}: the stand-in runs rate(...) schedules only, not cron")
        function = read_function(self.endpoint, str(target["Arn"]), self._published)
        runtime = self.runtimes.for_runtime(function.runtime)
        return ScheduleWorker(
            self.endpoint, rule_arn, period, target.get("Input"), function, self._work_dir, self._log, runtime
        )

    def status(self) -> dict[str, Any]:
        """What runs now (for ``order-pipeline sandbox status`` and ``make demo``)."""
        workers = [worker for _, worker in self._workers.values()]
        return {
            "updated": time.time(),
            #: When the last round began to read the endpoint: it saw every deploy finished before.
            "round_started": self._round_started,
            "mappings": [worker.status() for worker in workers if isinstance(worker, MappingWorker)],
            "schedules": [worker.status() for worker in workers if isinstance(worker, ScheduleWorker)],
            "problems": [f"{key}: {why}" for key, (_, why) in self._problems.items()],
        }

    def close(self) -> None:
        """Stop every worker (pollers first, then their execution environments)."""
        workers, self._workers = self._workers, {}
        for _, worker in workers.values():
            worker.stop()


def _never() -> Worker:
    raise AssertionError("a kept schedule is never rebuilt")


def _bind(build: Callable[..., Worker], *args: Any) -> Callable[[], Worker]:
    return lambda: build(*args)


def _describe(worker: Worker) -> str:
    runs_on = worker.status()["interpreter"]["line"]
    if isinstance(worker, MappingWorker):
        return (
            f"{worker.function.name} <- {worker.mapping.queue_arn.rsplit(':', 1)[1]} "
            f"(batch {worker.mapping.batch_size}, window {worker.mapping.batching_window_seconds} s, "
            f"{'ReportBatchItemFailures' if worker.mapping.reports_batch_item_failures else 'whole batches'}, "
            f"code {worker.function.code_sha256[:12]}); {runs_on}"
        )
    return f"{worker.function.name} every {worker.period} s ({worker.rule_arn.rsplit('/', 1)[-1]}); {runs_on}"
