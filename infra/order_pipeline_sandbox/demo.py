"""``make demo`` and ``make sandbox``: the rehearsal of a real deployment, and a chaos run through it.

:class:`Sandbox` does steps 1-3 of the issue: it starts the endpoint, deploys the stage with the
real CDK CLI, reads the function, its mapping and its code back from the endpoint, turns moto's
mapping off and prepares the function's execution environments. :func:`run_chaos` does steps 4-5:
it sends the traffic, polls the queue into the function while injecting crashes, waits for the
queue to drain and checks the invariants against the endpoint's state. Leaving the ``with`` block
stops every process the sandbox started (step 6).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline.keys import parse_identity_fields
from idempotent_order_pipeline.powertools import LAYER_ARN_PARAMETER_ID, POWERTOOLS_LAYER_PARAMETER
from order_pipeline_sandbox import checks, traffic, worked_app
from order_pipeline_sandbox.deploy import (
    DEFAULT_STAGE,
    REPO_ROOT,
    WORK_DIR,
    Deployment,
    bootstrap,
    deploy,
    publish_powertools_layer,
)
from order_pipeline_sandbox.function import (
    DeployedFunction,
    QueueMapping,
    describe_function,
    describe_mapping,
    disable_mapping,
)
from order_pipeline_sandbox.lambda_runtime import CrashOrder, FunctionProcess
from order_pipeline_sandbox.poller import DEFAULT_VISIBILITY_TIMEOUT_SECONDS, CrashPlan, PollerStats, SqsPoller
from order_pipeline_sandbox.server import Endpoint, SandboxServerProcess

#: Defaults of a run (``make demo`` reads ``DEMO_*`` variables to override them, see ``__main__``).
DEFAULT_ORDERS = 500
DEFAULT_SEED = 20261130
#: Share of invocations that crash at one of their AWS calls.
DEFAULT_CRASH_RATE = 0.2
#: Execution environments polled in parallel (Lambda would scale this; 2 suits a laptop).
DEFAULT_CONCURRENCY = 2
#: How long a run may take to drain before it is declared stuck.
DEFAULT_DRAIN_TIMEOUT_SECONDS = 600.0
#: Run directories kept under ``<work_dir>/runs`` (older ones are deleted when a sandbox starts).
KEPT_RUNS = 5

Log = Callable[[str], None]


@dataclass(frozen=True)
class SandboxOptions:
    """Where and what the sandbox deploys, and how many execution environments it prepares."""

    stage: str = DEFAULT_STAGE
    app_dir: Path = REPO_ROOT
    work_dir: Path = WORK_DIR
    context: Mapping[str, str] = field(default_factory=dict)
    concurrency: int = DEFAULT_CONCURRENCY
    #: A stage of the same app deployed first (e.g. the existing resources of a brownfield
    #: adoption), and which of its outputs become context of ``stage`` (output key -> context key).
    prerequisite_stage: str | None = None
    prerequisite_outputs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChaosOptions:
    """The traffic and the faults of a run."""

    orders: int = DEFAULT_ORDERS
    seed: int = DEFAULT_SEED
    crash_rate: float = DEFAULT_CRASH_RATE
    resend_share: float = traffic.DEFAULT_RESEND_SHARE
    conflict_share: float = traffic.DEFAULT_CONFLICT_SHARE
    invalid_share: float = traffic.DEFAULT_INVALID_SHARE
    #: Used only when the deployed pipeline has an ``order_schema`` (app.py's has).
    schema_violation_share: float = traffic.DEFAULT_SCHEMA_VIOLATION_SHARE
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT_SECONDS
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT_SECONDS


class Sandbox:
    """Steps 1-3: endpoint, ``cdk bootstrap`` + ``cdk deploy``, the deployed function ready to poll."""

    def __init__(self, options: SandboxOptions | None = None, log: Log | None = None) -> None:
        self.options = options or SandboxOptions()
        self._log = log or (lambda message: None)
        self._exit = contextlib.ExitStack()
        self.endpoint: Endpoint
        self.deployment: Deployment
        #: The ``prerequisite_stage``'s deployment, when there is one.
        self.prerequisite: Deployment | None = None
        self.function: DeployedFunction
        self.mapping: QueueMapping
        self.environments: list[FunctionProcess] = []
        self.server: SandboxServerProcess
        self.timings: dict[str, float] = {}
        self._run_dir = self.options.work_dir / "runs" / "not-started"

    @property
    def run_dir(self) -> Path:
        """This sandbox's own files (cloud assembly, CDK log, unpacked function, logs).

        One directory per sandbox, so that two sandboxes started from the same checkout (two
        developers, or a test and ``make sandbox``) never touch each other's files;
        ``<work_dir>/latest`` points at the newest.
        """
        return self._run_dir

    @property
    def logs_dir(self) -> Path:
        """The moto server's log and one log per execution environment (the function's output)."""
        return self._run_dir / "logs"

    def _make_run_dir(self) -> Path:
        runs = self.options.work_dir / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        for old in sorted(runs.iterdir())[: -(KEPT_RUNS - 1)]:
            if not _process_alive(old.name.rpartition("-")[2]):  # never a sandbox still running
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
        self.logs_dir.mkdir()
        with self._step("starting the moto server"):
            self.server = SandboxServerProcess(log_path=self.logs_dir / "moto-server.log")
            self.endpoint = self._exit.enter_context(self.server)
        with self._step("publishing the Powertools layer"):
            layer = publish_powertools_layer(self.endpoint, options.work_dir)
        with self._step("cdk bootstrap"):
            bootstrap(self.endpoint, work_dir=self.run_dir)
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
                work_dir=self.run_dir,
                layer=layer,
            )
        with self._step("reading the function back from the endpoint"):
            self.function = describe_function(self.endpoint, self.deployment)
            self.mapping = describe_mapping(
                self.endpoint, self.function, self.deployment.output(names.QUEUE_URL_OUTPUT)
            )
            disable_mapping(self.endpoint, self.mapping)
            task_dir, layer_dirs = self.function.unpack(self.run_dir / "function")
        for index in range(options.concurrency):
            environment = FunctionProcess(
                self.function, self.endpoint, task_dir, layer_dirs, self.logs_dir / f"function-{index}.log"
            )
            self._exit.callback(environment.stop)
            self.environments.append(environment)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit.close()

    def poller(self, *, visibility_timeout: int, crash_plan: CrashPlan | None) -> SqsPoller:
        return SqsPoller(
            self.endpoint,
            self.mapping,
            self.environments,
            visibility_timeout=visibility_timeout,
            crash_plan=crash_plan,
        )

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


def _process_alive(pid: str) -> bool:
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RandomCrashes:
    """Which invocations crash, and where: a seeded plan the poller asks before each invocation.

    The first ``guaranteed`` invocations crash for sure (at one of their first ``len(records)``
    calls: every record makes at least one), so that every run injects crashes; after that, each
    invocation crashes with probability ``rate`` at a random one of its first ``2 x records``
    calls (a new order costs 3 calls, a duplicate or a parked message 1), before the call is sent
    or after it returned. A batch holding a message on its last delivery (receive count at
    ``max_receive_count``) never crashes: the queue's redrive would then park a good message in the
    DLQ, which is correct behaviour but makes the run's figures depend on luck.
    """

    def __init__(self, rate: float, seed: int, *, max_receive_count: int | None, guaranteed: int = 2) -> None:
        self._rate = rate
        self._rng = random.Random(seed)  # noqa: S311 - chaos, not cryptography
        self._lock = threading.Lock()
        self._max_receive_count = max_receive_count
        self._guaranteed = guaranteed

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> CrashOrder | None:
        if self._max_receive_count is not None and any(
            int(record["attributes"].get("ApproximateReceiveCount", 1)) >= self._max_receive_count for record in records
        ):
            return None
        with self._lock:
            if self._guaranteed > 0:
                self._guaranteed -= 1
                return CrashOrder(at_call=self._rng.randint(1, len(records)), after=self._rng.random() < 0.5)
            if self._rng.random() >= self._rate:
                return None
            return CrashOrder(at_call=self._rng.randint(1, 2 * len(records)), after=self._rng.random() < 0.5)


@dataclass
class ChaosRun:
    """Everything a run produced: the plan, what the poller did, the state read back, the verdict."""

    plan: traffic.TrafficPlan
    stats: PollerStats
    state: checks.EndpointState
    result: checks.CheckResult
    metrics: Counter[str]
    wall_seconds: float
    drained: bool
    worked_app: worked_app.WorkedAppRun = field(default_factory=worked_app.WorkedAppRun)


def emf_metrics(logs_dir: Path) -> Counter[str]:
    """Sum the EMF metrics the function printed (what CloudWatch would aggregate from its logs)."""
    totals: Counter[str] = Counter()
    for path in sorted(logs_dir.glob("function-*.log")):
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


ProgressHook = Callable[[int, int, PollerStats], None]


def run_chaos(sandbox: Sandbox, options: ChaosOptions, on_progress: ProgressHook | None = None) -> ChaosRun:
    """Steps 4-5: send the traffic, poll it through the function with crashes, drain, check."""
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
    crashes = (
        RandomCrashes(options.crash_rate, options.seed, max_receive_count=sandbox.mapping.max_receive_count)
        if options.crash_rate > 0
        else None
    )
    poller = sandbox.poller(visibility_timeout=options.visibility_timeout, crash_plan=crashes)
    total = len(plan.messages)
    sent = 0

    def report(visible: int, in_flight: int) -> None:
        if on_progress is not None:
            on_progress(max(0, sent - visible - in_flight), total, poller.stats)

    def on_sent(count: int) -> None:
        nonlocal sent
        sent += count

    poller.start()
    try:
        traffic.send(
            sandbox.endpoint.client("sqs"), sandbox.deployment.output(names.QUEUE_URL_OUTPUT), plan.messages, on_sent
        )
        drained = poller.wait_until_drained(timeout=options.drain_timeout, on_tick=report)
    finally:
        poller.stop()
    report(*poller.queue_depth())
    state = checks.read_state(sandbox.endpoint, sandbox.deployment.outputs, notifications)
    result = checks.check(plan, state)
    app_run = worked_app.check_run(
        sandbox.endpoint,
        sandbox.deployment.outputs,
        violations,
        refusal,
        state,
        timeout=options.drain_timeout,
        fulfilment=False,
    )
    result.violations += app_run.violations
    for error in poller.stats.unexpected_errors[:3]:
        result.violations.append(f"function error (not injected): {error.error_type}: {error.message[:300]}")
    if not drained and not poller.stats.unexpected_errors:
        result.violations.append(f"the queue did not drain within {options.drain_timeout:.0f} s")
    if crashes is not None and poller.stats.crashes_injected == 0:
        result.violations.append("no crash was injected: the run proves nothing about crashes (raise the crash rate)")
    return ChaosRun(
        plan=plan,
        stats=poller.stats,
        state=state,
        result=result,
        metrics=emf_metrics(sandbox.logs_dir),
        wall_seconds=time.monotonic() - started,
        drained=drained,
        worked_app=app_run,
    )


def describe(sandbox: Sandbox) -> dict[str, Any]:
    """What was deployed, for the report and the sandbox banner."""
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
    }
