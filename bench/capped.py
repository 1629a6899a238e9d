"""The Lambda-CPU benchmark: each consumer in its own capped process, the stand-in in another one.

Set-up (:class:`CappedRun`):

* the HTTP stand-in (:mod:`bench.http_standin`) in its own process, pinned to the other cores, in
  its own uncapped cgroup with the top scheduling weight (so that it answers on time on a busy
  machine);
* one worker process per consumer (:mod:`bench.worker`), all pinned to the last core, each in its
  own cgroup (:mod:`bench.cgroups`) whose CPU quota is set to the share of the memory size being
  measured before each of its batches; without cgroups the workers run uncapped, labelled so.

Measurement (:meth:`CappedRun.sweep`), for each latency: round after round, for every memory size
(in an order that rotates with the round) and every consumer (in an order that rotates too), one
batch of 10 new orders, the same orders for every consumer within a round; after each batch an
idle gap of :data:`IDLE_GAP_S`, so that the next process starts with a full quota, as a Lambda
container does between invocations (a CFS quota refills every period). One warm-up batch per
consumer and memory size is run first and not kept.

The stand-in answers every call a fixed latency after it arrived and keeps no state, so the
batches are first deliveries; the calls it counted per batch are kept, to compare with moto's
counts in the same run (:mod:`bench.run`). CPU by component: a separate profiled worker per
consumer, uncapped (the profile's shares are then applied to the capped workers' CPU per record).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench import environment
from bench.cgroups import CgroupCaps, Quota, cpu_share, open_caps
from bench.orders import OrderSource, batch_event
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import EVENT_SOURCE_BATCH_SIZE

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Memory sizes of the sweep (MB), like AWS Lambda Power Tuning's defaults.
MEMORY_SIZES = (128, 256, 512, 1024, 1769, 3008)
#: Latencies per AWS call (ms) the capped benchmark runs at; the first one is the contract's.
LATENCIES_MS = (5.0, 10.0)
#: Consumers of the capped benchmark (``naive`` is kept for the detail file).
CAPPED_CONSUMERS = ("naive", "seed", "powertools", "ours")
#: Idle time after each batch (s): several CFS periods, so every quota is full again.
IDLE_GAP_S = 0.05
BATCH_SIZE = EVENT_SOURCE_BATCH_SIZE
REGION = "us-east-1"
TOPIC_ARN = f"arn:aws:sns:{REGION}:123456789012:orders"
DLQ_URL = f"https://sqs.{REGION}.amazonaws.com/123456789012/orders-dlq"
#: Each consumer's environment (tables need not exist: the stand-in keeps no state).
CONSUMER_ENVIRONMENT = {
    "naive": {"ORDERS_TABLE": "naive-orders", "TOPIC_ARN": TOPIC_ARN},
    "seed": {
        "PROCESSED_EVENTS_TABLE": "seed-processed-events",
        "ORDER_RECORDS_TABLE": "seed-order-records",
        "TOPIC_ARN": TOPIC_ARN,
    },
    "powertools": {
        "IDEMPOTENCY_TABLE": "powertools-idempotency",
        "ORDER_RECORDS_TABLE": "powertools-order-records",
        "TOPIC_ARN": TOPIC_ARN,
    },
    "ours": environment.ours(
        processed_events="ours-processed-events",
        order_records="ours-order-records",
        topic_arn=TOPIC_ARN,
        dead_letter_queue_url=DLQ_URL,
    ),
}


@dataclass
class Batch:
    """One batch of 10 through one capped consumer."""

    wall_ms: float
    cpu_ms: float
    calls: dict[str, int]


@dataclass
class Setting:
    """Every batch of one consumer at one memory size and one latency."""

    batches: list[Batch] = field(default_factory=list)

    def _percentile(self, values: Sequence[float], fraction: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]

    @property
    def median_ms(self) -> float:
        return statistics.median(b.wall_ms for b in self.batches)

    @property
    def p90_ms(self) -> float:
        return self._percentile([b.wall_ms for b in self.batches], 0.9)

    @property
    def cpu_ms_per_record(self) -> float:
        return statistics.median(b.cpu_ms for b in self.batches) / BATCH_SIZE

    @property
    def calls_per_batch(self) -> float:
        return statistics.median(sum(b.calls.values()) for b in self.batches)

    def calls_by_operation(self) -> dict[str, float]:
        operations = sorted({op for b in self.batches for op in b.calls})
        return {op: statistics.median(b.calls.get(op, 0) for b in self.batches) for op in operations}


@dataclass
class SweepResult:
    """The capped benchmark's samples and how they were taken."""

    capped: bool
    cap_note: str
    #: latency (ms) -> memory (MB) -> consumer -> samples
    settings: dict[float, dict[int, dict[str, Setting]]]
    #: memory (MB) -> the quota the kernel held for it (read back), when capped
    quotas: dict[int, Quota]
    #: consumer -> CPU seconds by component (profiled, uncapped)
    components: dict[str, dict[str, float]]
    worker_cpu: int
    standin_cpus: list[int]
    rounds: int
    idle_gap_s: float = IDLE_GAP_S


class _Worker:
    """A running :mod:`bench.worker` process."""

    def __init__(self, name: str, env: Mapping[str, str], cpu: int | None, *, profile: bool = False) -> None:
        command = [sys.executable, "-m", "bench.worker", name]
        if cpu is not None:
            command += ["--cpu", str(cpu)]
        if profile:
            command.append("--profile")
        self.name = name
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            command, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT
        )
        ready = self._read()
        self.pid = int(ready["pid"])

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} worker exited (status {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                stdin = self.process.stdin
                assert stdin is not None
                stdin.write(json.dumps({"op": "exit"}) + "\n")
                stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


class StandInServer:
    """The HTTP stand-in process."""

    def __init__(self, latency_ms: float, cpus: Iterable[int] | None) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "bench.http_standin", "--latency-ms", str(latency_ms)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        if len(line) != 2 or line[0] != "PORT":
            raise RuntimeError(f"the stand-in did not start: {line!r}")
        self.url = f"http://127.0.0.1:{line[1]}"
        if cpus:
            os.sched_setaffinity(self.process.pid, set(cpus))

    def _control(self, path: str, *, post: bool = True) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.url}/__bench/{path}", data=b"" if post else None)  # noqa: S310 - localhost
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - localhost
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    def set_latency(self, latency_ms: float) -> None:
        self._control(f"latency?ms={latency_ms}")

    def reset(self) -> None:
        self._control("reset")

    def counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in self._control("counts", post=False).items()}

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def worker_environment(name: str, endpoint: str) -> dict[str, str]:
    """A worker's environment: the stand-in as every service's endpoint, fake credentials, the consumer's
    variables, and no proxy (localhost)."""
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_")) and "PROXY" not in k.upper()
    }
    return {
        **keep,
        "PYTHONPATH": os.pathsep.join(str(p) for p in (REPO_ROOT / "lambdas", REPO_ROOT)),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_SESSION_TOKEN": "bench",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_LAMBDA_FUNCTION_NAME": "order-consumer",
        "POWERTOOLS_SERVICE_NAME": "order-consumer",
        "POWERTOOLS_METRICS_NAMESPACE": "OrderPipelineBench",
        "NO_PROXY": "127.0.0.1,localhost",
        **CONSUMER_ENVIRONMENT[name],
    }


def _cores() -> tuple[int, list[int]]:
    """The core the workers are pinned to (the last one we may use) and the stand-in's cores."""
    allowed = sorted(os.sched_getaffinity(0))
    worker = allowed[-1]
    return worker, [c for c in allowed if c != worker] or [worker]


class CappedRun:
    """The stand-in, the workers and their cgroups; :meth:`close` stops and removes them all."""

    def __init__(self, consumers: Sequence[str] = CAPPED_CONSUMERS, *, try_caps: bool = True) -> None:
        self.consumers = list(consumers)
        self.worker_cpu, self.standin_cpus = _cores()
        self.caps: CgroupCaps | None
        if try_caps:
            self.caps, self.cap_note = open_caps()
        else:
            self.caps, self.cap_note = None, "caps not tried (--no-caps)"
        self.server = StandInServer(LATENCIES_MS[0], self.standin_cpus)
        self.workers: dict[str, _Worker] = {}
        try:
            if self.caps is not None:  # uncapped, but first in line for its cores: answers on time
                self.caps.create("standin")
                self.caps.add("standin", self.server.process.pid)
            for name in self.consumers:
                if self.caps is not None:
                    self.caps.create(name)
                worker = _Worker(name, worker_environment(name, self.server.url), self.worker_cpu)
                self.workers[name] = worker
                if self.caps is not None:
                    self.caps.add(name, worker.pid)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()
        if self.caps is not None:
            self.caps.close()
        self.server.close()

    def _apply(self, memory_mb: int) -> None:
        if self.caps is not None:  # the workers only: the stand-in stays uncapped
            for name in self.consumers:
                self.caps.set_quota(name, Quota.for_memory(memory_mb))

    def _batch(self, name: str, event: dict[str, Any]) -> Batch:
        self.server.reset()
        answer = self.workers[name].request({"op": "batch", "event": event})
        calls = self.server.counts()
        unknown = {op: n for op, n in calls.items() if op.startswith("unknown:")}
        if answer["failures"] or unknown:
            raise AssertionError(
                f"{name}: {answer['failures']} records failed against the HTTP stand-in (calls {calls}); "
                "the figures would be void"
            )
        time.sleep(IDLE_GAP_S)
        return Batch(wall_ms=answer["wall_ms"], cpu_ms=answer["cpu_ms"], calls=calls)

    def sweep(
        self,
        *,
        rounds: int,
        memory_sizes: Sequence[int] = MEMORY_SIZES,
        latencies_ms: Sequence[float] = LATENCIES_MS,
        source: OrderSource,
        rng: random.Random,
        progress: Callable[[str], None] | None = None,
    ) -> SweepResult:
        settings: dict[float, dict[int, dict[str, Setting]]] = {}
        quotas: dict[int, Quota] = {}
        started = time.perf_counter()
        for latency in latencies_ms:
            self.server.set_latency(latency)
            by_memory = settings.setdefault(latency, {m: {n: Setting() for n in self.consumers} for m in memory_sizes})
            for memory in memory_sizes:  # warm-up: one batch per consumer and size, not kept
                self._apply(memory)
                event = batch_event(list(source.orders(BATCH_SIZE)), rng)
                for name in self.consumers:
                    self._batch(name, event)
                if self.caps is not None:
                    quotas[memory] = self.caps.quota(self.consumers[0])
            for index in range(rounds):
                sizes = list(memory_sizes)
                sizes = sizes[index % len(sizes) :] + sizes[: index % len(sizes)]
                for turn, memory in enumerate(sizes):
                    self._apply(memory)
                    event = batch_event(list(source.orders(BATCH_SIZE)), rng)
                    shift = (index + turn) % len(self.consumers)
                    for name in self.consumers[shift:] + self.consumers[:shift]:
                        by_memory[memory][name].batches.append(self._batch(name, event))
                if progress is not None:
                    progress(
                        f"capped: {latency:g} ms/call, round {index + 1}/{rounds} "
                        f"({time.perf_counter() - started:.0f} s since the start of the sweep)"
                    )
        return SweepResult(
            capped=self.caps is not None,
            cap_note=self.caps.description if self.caps is not None else self.cap_note,
            settings=settings,
            quotas=quotas,
            components={},
            worker_cpu=self.worker_cpu,
            standin_cpus=self.standin_cpus,
            rounds=rounds,
        )

    def profile(
        self, *, batches: int, latency_ms: float, source: OrderSource, rng: random.Random
    ) -> dict[str, dict[str, float]]:
        """Each consumer's CPU shares by component: a fresh profiled worker each, uncapped, ``batches`` batches."""
        self.server.set_latency(latency_ms)
        result = {}
        for name in self.consumers:
            worker = _Worker(name, worker_environment(name, self.server.url), self.worker_cpu, profile=True)
            try:
                event = batch_event(list(source.orders(BATCH_SIZE)), rng)
                worker.request({"op": "batch", "event": event})  # warm-up: clients, first calls
                worker.request({"op": "baseline"})
                for _ in range(batches):
                    worker.request({"op": "batch", "event": batch_event(list(source.orders(BATCH_SIZE)), rng)})
                seconds = worker.request({"op": "components"})["components"]
            finally:
                worker.close()
            total = sum(seconds.values())
            result[name] = {component: value / total for component, value in seconds.items()} if total else {}
        return result


def share_label(memory_mb: int) -> float:
    return round(cpu_share(memory_mb), 3)
