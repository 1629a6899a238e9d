"""``make demo``: the stand-in pointed at this repository's app, and a chaos run through it.

The same tool a team uses on its own app (``order-pipeline sandbox start``, :mod:`.control`), with
this repository's ``dev`` stage: :class:`Sandbox` starts the stand-in (with the chaos run's crash
plan), deploys the stage with the real CDK CLI and waits until the stand-in runs the deployed
function from its mapping. :func:`run_chaos` sends the traffic, waits for the queue to drain and
checks the invariants against the endpoint's state. Leaving the ``with`` block stops the stand-in
and every process it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline.keys import parse_identity_fields
from idempotent_order_pipeline.powertools import LAYER_ARN_PARAMETER_ID, POWERTOOLS_LAYER_PARAMETER
from idempotent_order_pipeline.sandbox import checks, control, traffic, worked_app
from idempotent_order_pipeline.sandbox.deploy import CDK_CLI, DEFAULT_STAGE, WORK_DIR, Deployment, deploy
from idempotent_order_pipeline.sandbox.function import (
    DeployedFunction,
    QueueMapping,
    describe_function,
    describe_mapping,
)
from idempotent_order_pipeline.sandbox.paths import REPO_ROOT
from idempotent_order_pipeline.sandbox.poller import DEFAULT_VISIBILITY_TIMEOUT_SECONDS
from idempotent_order_pipeline.sandbox.server import Endpoint
from idempotent_order_pipeline.sandbox.supervisor import SupervisorOptions

#: Defaults of a run (``make demo`` reads ``DEMO_*`` variables to override them, see ``__main__``).
DEFAULT_ORDERS = 500
DEFAULT_SEED = 20261130
#: Share of invocations that crash at one of their AWS calls.
DEFAULT_CRASH_RATE = 0.2
#: Execution environments per function (Lambda would scale this; 2 suits a laptop).
DEFAULT_CONCURRENCY = 2
#: How long a run may take to drain before it is declared stuck.
DEFAULT_DRAIN_TIMEOUT_SECONDS = 600.0
#: How long the stand-in may take to pick the deployed function up.
LIVE_TIMEOUT_SECONDS = 60.0
#: Run directories kept under ``<work_dir>/runs`` (older ones are deleted when a sandbox starts).
KEPT_RUNS = 5

Log = Callable[[str], None]


@dataclass(frozen=True)
class SandboxOptions:
    """What the sandbox deploys, and how the stand-in runs it (crashes included)."""

    stage: str = DEFAULT_STAGE
    app_dir: Path = REPO_ROOT
    work_dir: Path = WORK_DIR
    context: Mapping[str, str] = field(default_factory=dict)
    concurrency: int = DEFAULT_CONCURRENCY
    #: Share of invocations that crash (0: none) and the crash plan's seed.
    crash_rate: float = 0.0
    crash_seed: int = DEFAULT_SEED
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT_SECONDS
    #: A stage of the same app deployed first (e.g. the existing resources of a brownfield
    #: adoption), and which of its outputs become context of ``stage`` (output key -> context key).
    prerequisite_stage: str | None = None
    prerequisite_outputs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChaosOptions:
    """The traffic of a run (the crashes are the stand-in's: :class:`SandboxOptions`)."""

    orders: int = DEFAULT_ORDERS
    seed: int = DEFAULT_SEED
    resend_share: float = traffic.DEFAULT_RESEND_SHARE
    conflict_share: float = traffic.DEFAULT_CONFLICT_SHARE
    invalid_share: float = traffic.DEFAULT_INVALID_SHARE
    #: Used only when the deployed pipeline has an ``order_schema`` (app.py's has).
    schema_violation_share: float = traffic.DEFAULT_SCHEMA_VIOLATION_SHARE
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT_SECONDS


@dataclass(frozen=True)
class RunStats:
    """What the stand-in's poller did for the consumer's mapping (from its ``status.json``)."""

    invocations: int = 0
    cold_starts: int = 0
    crashes_injected: int = 0
    records_reported_failed: int = 0
    poller_errors: int = 0
    unexpected_errors: list[str] = field(default_factory=list)
    #: Each execution environment's pid and the file its handler package was imported from.
    environments: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_status(cls, mapping: Mapping[str, Any]) -> RunStats:
        return cls(
            invocations=int(mapping["invocations"]),
            cold_starts=int(mapping["cold_starts"]),
            crashes_injected=int(mapping["crashes_injected"]),
            records_reported_failed=int(mapping["records_reported_failed"]),
            poller_errors=int(mapping["poller_errors"]),
            unexpected_errors=list(mapping["unexpected_errors"]),
            environments=list(mapping["environments"]),
        )


class Sandbox:
    """The stand-in started, the stage deployed onto it with ``cdk deploy``, its consumer live."""

    def __init__(self, options: SandboxOptions | None = None, log: Log | None = None) -> None:
        self.options = options or SandboxOptions()
        self._log = log or (lambda message: None)
        self._exit = contextlib.ExitStack()
        self.endpoint: Endpoint
        self.stand_in: control.Running
        self.deployment: Deployment
        #: The ``prerequisite_stage``'s deployment, when there is one.
        self.prerequisite: Deployment | None = None
        self.function: DeployedFunction
        self.mapping: QueueMapping
        self.timings: dict[str, float] = {}
        self._run_dir = self.options.work_dir / "runs" / "not-started"
        #: queue_depth's client: a drain polls it 4 times a second, and a client made per call (its own
        #: boto3 session) costs about 100 ms of CPU.
        self._sqs: Any = None

    @property
    def run_dir(self) -> Path:
        """This sandbox's own files: the stand-in's state directory, the cloud assembly, the CDK log.

        One directory per sandbox, so that two sandboxes started from the same checkout (two
        developers, or a test and ``make demo``) never touch each other's files;
        ``<work_dir>/latest`` points at the newest.
        """
        return self._run_dir

    @property
    def logs_dir(self) -> Path:
        """The endpoint's log and one log per execution environment (the functions' output)."""
        return control.StateDir(self._run_dir).logs_dir

    def _make_run_dir(self) -> Path:
        runs = self.options.work_dir / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        for old in sorted(runs.iterdir())[: -(KEPT_RUNS - 1)]:
            if control.running(control.StateDir(old)) is None:  # never a sandbox still running
                shutil.rmtree(old, ignore_errors=True)
        run_dir = runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        run_dir.mkdir()
        latest = self.options.work_dir / "latest"
        with contextlib.suppress(OSError):
            staged = latest.with_name(f".latest-{os.getpid()}")
            staged.unlink(missing_ok=True)
            staged.symlink_to(run_dir.relative_to(self.options.work_dir))
            staged.replace(latest)
        return run_dir

    @contextlib.contextmanager
    def _step(self, name: str) -> Iterator[None]:
        self._log(f"{name}...")
        started = time.monotonic()
        yield
        self.timings[name] = time.monotonic() - started

    def __enter__(self) -> Sandbox:
        try:
            self._start()
        except BaseException:
            self._exit.close()
            raise
        return self

    def _start(self) -> None:
        options = self.options
        self._run_dir = self._make_run_dir()
        state = control.StateDir(self._run_dir)
        supervisor = SupervisorOptions(
            concurrency=options.concurrency,
            visibility_timeout=options.visibility_timeout,
            crash_rate=options.crash_rate,
            seed=options.crash_seed,
        )
        with self._step("order-pipeline sandbox start (moto, Powertools layer, cdk bootstrap)"):
            self._exit.callback(control.stop, state)
            self.stand_in, _ = control.start(state, options=supervisor, cdk=str(CDK_CLI))
            self.endpoint = Endpoint(url=self.stand_in.endpoint_url, region=self.stand_in.region)
            self._sqs = self.endpoint.client("sqs")
        # The stack's layer resolves from the Powertools parameter the stand-in published.
        layer = self.stand_in.layer
        context = dict(options.context)
        if options.prerequisite_stage is not None:
            with self._step(f"cdk deploy {options.prerequisite_stage}/*"):
                prerequisite = self.prerequisite = deploy(
                    self.endpoint,
                    stage=options.prerequisite_stage,
                    context={"env": options.prerequisite_stage, **options.context},
                    app_dir=options.app_dir,
                    work_dir=self.run_dir / "prerequisite",
                    layer=layer,
                    required_outputs=tuple(options.prerequisite_outputs),
                )
            context |= {key: prerequisite.output(output) for output, key in options.prerequisite_outputs.items()}
        with self._step(f"cdk deploy {options.stage}/*"):
            self.deployment = deploy(
                self.endpoint,
                stage=options.stage,
                context={"env": options.stage, **context},
                app_dir=options.app_dir,
                work_dir=self.run_dir / "deploy",
                layer=layer,
            )
        with self._step("the stand-in runs the deployed function"):
            self.function = describe_function(self.endpoint, self.deployment)
            self.mapping = describe_mapping(
                self.endpoint, self.function, self.deployment.output(names.QUEUE_URL_OUTPUT)
            )
            self._wait_until_live()

    def _wait_until_live(self) -> None:
        deadline = time.monotonic() + LIVE_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.consumer_status() is not None:
                return
            time.sleep(0.25)
        problems = self.stand_in.status().get("problems", [])
        raise control.StandInError(
            f"the stand-in did not run {self.function.name} within {LIVE_TIMEOUT_SECONDS:.0f} s "
            f"(problems: {problems or 'none'}; see {control.StateDir(self._run_dir).log_file})"
        )

    def consumer_status(self) -> dict[str, Any] | None:
        """The stand-in's status of the consumer's mapping, as deployed now (None until it runs it)."""
        for mapping in self.stand_in.status().get("mappings", []):
            if mapping["uuid"] == self.mapping.uuid and mapping["code_sha256"] == self.function.code_sha256:
                return dict(mapping)
        return None

    def stats(self, *, fresh: bool = False) -> RunStats:
        """The consumer's figures; ``fresh``: from a status the stand-in wrote after this call."""
        asked, deadline = time.time(), time.monotonic() + LIVE_TIMEOUT_SECONDS
        while fresh and self.stand_in.status().get("updated", 0) <= asked and time.monotonic() < deadline:
            time.sleep(0.2)
        status = self.consumer_status()
        return RunStats() if status is None else RunStats.from_status(status)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit.close()

    def subscribe_queue(self, name: str) -> str:
        """A queue subscribed to the topic (raw delivery): the notifications, as a subscriber sees them."""
        sqs = self.endpoint.client("sqs")
        url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.endpoint.client("sns").subscribe(
            TopicArn=self.deployment.output(names.TOPIC_ARN_OUTPUT),
            Protocol="sqs",
            Endpoint=arn,
            Attributes={"RawMessageDelivery": "true"},
        )
        return url

    def queue_depth(self, queue_url: str | None = None) -> tuple[int, int]:
        """(visible, in flight) messages of the source queue (or ``queue_url``)."""
        return checks.queue_depth(self._sqs, queue_url or self.mapping.queue_url)

    def wait_until_drained(
        self, *, timeout: float, settle_seconds: float = 2.0, on_tick: Callable[[int, int], None] | None = None
    ) -> bool:
        """Wait until the source queue holds no message, visible or in flight, for ``settle_seconds``.

        Returns False on timeout.
        """
        deadline = time.monotonic() + timeout
        empty_since: float | None = None
        while time.monotonic() < deadline:
            visible, in_flight = self.queue_depth()
            if on_tick is not None:
                on_tick(visible, in_flight)
            if visible == 0 and in_flight == 0:
                empty_since = empty_since or time.monotonic()
                if time.monotonic() - empty_since >= settle_seconds:
                    return True
            else:
                empty_since = None
            time.sleep(0.25)
        return False


@dataclass
class ChaosRun:
    """Everything a run produced: the plan, what the poller did, the state read back, the verdict."""

    plan: traffic.TrafficPlan
    stats: RunStats
    state: checks.EndpointState
    result: checks.CheckResult
    metrics: Counter[str]
    wall_seconds: float
    drained: bool
    worked_app: worked_app.WorkedAppRun = field(default_factory=worked_app.WorkedAppRun)


def emf_metrics(logs_dir: Path, function_name: str) -> Counter[str]:
    """Sum the EMF metrics the function printed (what CloudWatch would aggregate from its logs)."""
    totals: Counter[str] = Counter()
    for path in sorted(logs_dir.glob(f"{function_name}-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("{") or '"_aws"' not in line:
                continue
            with contextlib.suppress(ValueError):
                document = json.loads(line)
                for directive in document["_aws"].get("CloudWatchMetrics", []):
                    for metric in directive.get("Metrics", []):
                        value = document.get(metric["Name"], 0)
                        totals[metric["Name"]] += int(sum(value) if isinstance(value, list) else value)
    return totals


ProgressHook = Callable[[int, int, RunStats], None]


def run_chaos(sandbox: Sandbox, options: ChaosOptions, on_progress: ProgressHook | None = None) -> ChaosRun:
    """Send the traffic while the stand-in polls it through the function (with its crashes), drain, check."""
    started = time.monotonic()
    identity = parse_identity_fields(sandbox.function.environment.get(names.IDENTITY_FIELDS_VARIABLE))
    schema = worked_app.order_schema(sandbox.endpoint, sandbox.deployment.stack_name)
    plan = traffic.plan_traffic(
        options.orders,
        seed=options.seed,
        identity_fields=identity,
        resend_share=options.resend_share,
        conflict_share=options.conflict_share,
        invalid_share=options.invalid_share,
        schema_violation_share=options.schema_violation_share if schema is not None else 0.0,
    )
    violations = traffic.schema_violations(plan)
    # The producer refuses the first schema violation; the run then sends it (and the others) raw.
    refusal = (
        worked_app.refuse_at_producer(
            sandbox.endpoint, sandbox.deployment.output(names.QUEUE_URL_OUTPUT), schema, violations[0]
        )
        if schema is not None and violations
        else None
    )
    notifications = sandbox.subscribe_queue(f"sandbox-notifications-{plan.run_id}")
    total = len(plan.messages)
    sent = 0

    def report(visible: int, in_flight: int) -> None:
        if on_progress is not None:
            on_progress(max(0, sent - visible - in_flight), total, sandbox.stats())

    def on_sent(count: int) -> None:
        nonlocal sent
        sent += count

    traffic.send(
        sandbox.endpoint.client("sqs"), sandbox.deployment.output(names.QUEUE_URL_OUTPUT), plan.messages, on_sent
    )
    drained = sandbox.wait_until_drained(timeout=options.drain_timeout, on_tick=report)
    stats = sandbox.stats(fresh=True)
    report(*sandbox.queue_depth())
    state = checks.read_state(sandbox.endpoint, sandbox.deployment.outputs, notifications)
    result = checks.check(plan, state)
    app_run = worked_app.check_run(
        sandbox.endpoint,
        sandbox.deployment.outputs,
        violations,
        refusal,
        state,
        timeout=options.drain_timeout,
        fulfilment=True,
    )
    result.violations += app_run.violations
    for error in stats.unexpected_errors[:3]:
        result.violations.append(f"function error (not injected): {error}")
    if not drained:
        result.violations.append(f"the queue did not drain within {options.drain_timeout:.0f} s")
    if sandbox.options.crash_rate > 0 and stats.crashes_injected == 0:
        result.violations.append("no crash was injected: the run proves nothing about crashes (raise the crash rate)")
    return ChaosRun(
        plan=plan,
        stats=stats,
        state=state,
        result=result,
        metrics=emf_metrics(sandbox.logs_dir, sandbox.function.name),
        wall_seconds=time.monotonic() - started,
        drained=drained,
        worked_app=app_run,
    )


def describe(sandbox: Sandbox) -> dict[str, Any]:
    """What was deployed, for the report."""
    return {
        "endpoint": sandbox.endpoint.url,
        "stack": sandbox.deployment.stack_name,
        "function": f"{sandbox.function.name} ({sandbox.function.handler}, {sandbox.function.runtime}, "
        f"{sandbox.function.timeout_seconds} s)",
        "mapping": f"batch {sandbox.mapping.batch_size}, {', '.join(sandbox.mapping.function_response_types) or '-'}, "
        f"maxReceiveCount {sandbox.mapping.max_receive_count}",
        "layer": f"{', '.join(layer.arn for layer in sandbox.function.layers) or '-'} (deployed through the stack "
        f"parameter {LAYER_ARN_PARAMETER_ID} = SSM {POWERTOOLS_LAYER_PARAMETER})",
        "skipped": sandbox.deployment.skipped_types,
        "interpreters": interpreters(sandbox.stand_in.status()),
    }


def interpreters(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Which interpreter runs each function the stand-in runs (once per function): its status entry."""
    workers = [*status.get("mappings", []), *status.get("schedules", [])]
    found: dict[str, dict[str, Any]] = {}
    for worker in workers:
        if "interpreter" in worker:
            found.setdefault(str(worker["function"]), dict(worker["interpreter"]))
    return [found[name] for name in sorted(found)]
