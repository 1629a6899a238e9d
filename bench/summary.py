"""From samples to figures: per consumer, the contract's figures and the details behind them, the
Lambda-CPU sweep per memory size, and the issue's targets."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.capped import SweepResult
from bench.cgroups import cpu_share
from bench.coldstart import ImportTime
from bench.prices import OrderCost, ReconcilerRun, cost_per_million
from bench.run import BATCH_SIZE, Samples

#: Issue 12's targets, "ours" against the peers in the same run, at 5 ms per call.
MAX_BATCH_RATIO_SEED = 0.25
MAX_BATCH_RATIO_POWERTOOLS = 0.20
MAX_BATCH_RATIO_SEED_512 = 0.50
MAX_CPU_MS_PER_RECORD = 1.8
#: Issue 32's budget: a transaction per record, one PublishBatch, and the ten sent marks in one
#: BatchExecuteStatement (one PartiQL UPDATE each, 1 WRU, each with its own record's condition).
MAX_CALLS_PER_BATCH_NEW = BATCH_SIZE + 2
REDELIVERY_CALLS = 1
#: Issue 21's targets: every cost counted (``usd_breakdown``), and import plus clients.
MAX_USD_RATIO_SEED = 1.00
MAX_COLD_START_RATIO_POWERTOOLS = 0.80
#: The consumers of ``lambda_cpu`` in results.json.
LAMBDA_CPU_CONSUMERS = ("seed", "powertools", "ours")

OPERATION_ABBREVIATIONS = {
    "TransactWriteItems": "TxWrite",
    "PutItem": "Put",
    "UpdateItem": "Update",
    "BatchExecuteStatement": "BatchExecuteStatement",
    "GetItem": "Get",
    "Publish": "Publish",
    "PublishBatch": "PublishBatch",
    "BatchWriteItem": "BatchWrite",
    "SendMessage": "SendMessage",
    "SendMessageBatch": "SendMessageBatch",
}


def breakdown(cost: OrderCost) -> dict[str, float]:
    """``usd_breakdown``: the line items rounded so that they add up to the rounded total exactly."""
    lines = {name: round(value, 4) for name, value in cost.as_dict().items()}
    # rounding each line can leave the sum a few 0.0001 off the rounded total: the largest line absorbs it
    largest = max(lines, key=lambda name: lines[name])
    lines[largest] = round(lines[largest] + round(cost.total, 4) - round(sum(lines.values()), 4), 4)
    return lines


def _per_msg(counter: Counter[str], messages: int) -> dict[str, float]:
    return {op: round(count / messages, 3) for op, count in sorted(counter.items(), key=lambda kv: -kv[1])}


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _max_item_bytes(samples: Samples) -> dict[str, int]:
    largest: dict[str, int] = {}
    for delivery in samples.first + samples.again:
        for table, size in delivery.tally.item_bytes.items():
            largest[table] = max(largest.get(table, 0), size)
    return dict(sorted(largest.items()))


@dataclass
class Figures:
    """Everything reported for one consumer."""

    name: str
    batch10_ms: float
    per_1000_ms: float
    calls_per_msg_first: float
    calls_per_msg_redelivery: float
    wru_per_msg: float
    rru_per_msg: float
    usd_per_million: float
    #: Writes to the tables' indexes (apart from ``wru_per_msg``, the tables').
    index_wru_per_msg: float
    cold_import_ms: float
    duplicate_rows: int
    # details
    batch10_ms_zero_latency: float
    per_1000_ms_zero_latency: float
    redelivery_batch10_ms: float
    calls_first_by_operation: dict[str, float]
    calls_redelivery_by_operation: dict[str, float]
    wru_per_msg_redelivery: float
    rru_per_msg_redelivery: float
    publishes_per_msg_first: float
    publishes_per_msg_redelivery: float
    sns_requests_per_msg: float
    sqs_requests_per_msg: float
    calls_per_batch_first: float
    cold_start_ms: float
    cold_start_cpu_ms: float
    #: The batch time the USD column bills: capped, at the default memory, at the contract's latency.
    billed_batch_ms: float
    moto_ms_per_call: dict[str, float]
    moto_ms_per_batch: float
    consumer_cpu_ms_per_batch: float
    batch10_ms_wall: float
    per_1000_ms_wall: float
    stand_in_ms_per_batch: float
    log_bytes_per_msg: float
    max_item_bytes: dict[str, int]
    cold_import_cpu_ms: float
    cost: OrderCost
    #: The consumer's scheduled reconciler runs, billed per order (None: it has none).
    reconciler: ReconcilerRun | None
    #: Consumer time of each first delivery, in run order (batch i is the same orders for everyone).
    batch_samples_ms: list[float] = field(default_factory=list)
    cold_import_samples_ms: list[float] = field(default_factory=list)
    messages: int = 0
    redelivered: int = 0

    def contract(self) -> dict[str, float | int]:
        """The nine figures of ``bench/results.json``, in the issue's order."""
        return {
            "batch10_ms": round(self.batch10_ms, 1),
            "per_1000_ms": round(self.per_1000_ms, 1),
            "calls_per_msg_first": round(self.calls_per_msg_first, 3),
            "calls_per_msg_redelivery": round(self.calls_per_msg_redelivery, 3),
            "wru_per_msg": round(self.wru_per_msg, 3),
            "rru_per_msg": round(self.rru_per_msg, 3),
            "usd_per_million": round(self.usd_per_million, 4),
            "cold_import_ms": round(self.cold_import_ms, 1),
            "cold_start_ms": round(self.cold_start_ms, 1),
            "duplicate_rows": self.duplicate_rows,
            "index_wru_per_msg": round(self.index_wru_per_msg, 3),
            "usd_breakdown": breakdown(self.cost),
        }

    def details(self) -> dict[str, Any]:
        return {
            "batch10_ms_zero_latency": round(self.batch10_ms_zero_latency, 1),
            "per_1000_ms_zero_latency": round(self.per_1000_ms_zero_latency, 1),
            "redelivery_batch10_ms": round(self.redelivery_batch10_ms, 1),
            "calls_first_by_operation": self.calls_first_by_operation,
            "calls_redelivery_by_operation": self.calls_redelivery_by_operation,
            "wru_per_msg_redelivery": round(self.wru_per_msg_redelivery, 3),
            "rru_per_msg_redelivery": round(self.rru_per_msg_redelivery, 3),
            "publishes_per_msg_first": round(self.publishes_per_msg_first, 3),
            "publishes_per_msg_redelivery": round(self.publishes_per_msg_redelivery, 3),
            "sns_billed_requests_per_msg": round(self.sns_requests_per_msg, 3),
            "sqs_billed_requests_per_msg": round(self.sqs_requests_per_msg, 3),
            "calls_per_batch_of_10_first": self.calls_per_batch_first,
            "cold_start_ms": round(self.cold_start_ms, 1),
            "cold_start_cpu_ms": round(self.cold_start_cpu_ms, 1),
            "usd_billed_batch_ms": round(self.billed_batch_ms, 1),
            "moto_ms_per_call": self.moto_ms_per_call,
            "moto_ms_per_batch": round(self.moto_ms_per_batch, 1),
            "stand_in_ms_per_batch": round(self.stand_in_ms_per_batch, 1),
            "batch10_ms_wall_with_stand_in": round(self.batch10_ms_wall, 1),
            "per_1000_ms_wall_with_stand_in": round(self.per_1000_ms_wall, 1),
            "consumer_cpu_ms_per_batch": round(self.consumer_cpu_ms_per_batch, 1),
            "log_bytes_per_msg": round(self.log_bytes_per_msg, 1),
            "max_item_bytes": self.max_item_bytes,
            "cold_import_cpu_ms": round(self.cold_import_cpu_ms, 1),
            "cold_import_samples_ms": [round(v, 1) for v in self.cold_import_samples_ms],
            "messages": self.messages,
            "redelivered_messages": self.redelivered,
        }


def figures(
    name: str,
    at_latency: Samples,
    at_zero: Samples,
    cold_imports: list[ImportTime],
    memory_mb: int,
    billed_batch_ms: float,
    reconciler: ReconcilerRun | None = None,
) -> Figures:
    """The figures of one consumer from its samples on moto (at the latency and at 0 ms).

    ``billed_batch_ms`` is the batch time the USD column bills at ``memory_mb``: the capped one;
    ``reconciler`` the consumer's scheduled runs, if it has any.
    """
    messages = at_latency.messages
    wru = at_latency.per_msg("first", lambda d: d.tally.wru)
    index_wru = at_latency.per_msg("first", lambda d: d.tally.index_wru)
    log_bytes = at_latency.per_msg("first", lambda d: d.log_bytes)
    cold_start_ms = min(sample.start_wall_ms for sample in cold_imports)
    rru = at_latency.per_msg("first", lambda d: d.tally.rru)
    publishes = at_latency.per_msg("first", lambda d: d.tally.publishes)
    sns_requests = at_latency.per_msg("first", lambda d: d.tally.sns_requests)
    sqs_requests = at_latency.per_msg("first", lambda d: d.tally.sqs_requests)
    batch_ms = at_latency.batch_ms("first")
    cost = cost_per_million(
        wru_per_msg=wru,
        index_wru_per_msg=index_wru,
        rru_per_msg=rru,
        sns_requests_per_msg=sns_requests,
        sqs_requests_per_msg=sqs_requests,
        batch_ms=billed_batch_ms,
        batch_size=BATCH_SIZE,
        memory_mb=memory_mb,
        init_ms=cold_start_ms,
        log_bytes_per_msg=log_bytes,
        reconciler=reconciler,
    )
    moto_ms = at_latency.moto_ms()
    first_calls = at_latency.calls("first")
    again_calls = at_latency.calls("again")
    return Figures(
        name=name,
        batch10_ms=batch_ms,
        per_1000_ms=at_latency.per_thousand_ms(),
        calls_per_msg_first=sum(first_calls.values()) / messages,
        calls_per_msg_redelivery=sum(again_calls.values()) / messages,
        wru_per_msg=wru,
        rru_per_msg=rru,
        usd_per_million=cost.total,
        index_wru_per_msg=index_wru,
        cold_import_ms=min(sample.wall_ms for sample in cold_imports),
        cold_import_cpu_ms=min(sample.cpu_ms for sample in cold_imports),
        duplicate_rows=at_latency.duplicate_rows + at_zero.duplicate_rows,
        batch10_ms_zero_latency=at_zero.batch_ms("first"),
        per_1000_ms_zero_latency=at_zero.per_thousand_ms(),
        redelivery_batch10_ms=at_latency.batch_ms("again"),
        calls_first_by_operation=_per_msg(first_calls, messages),
        calls_redelivery_by_operation=_per_msg(again_calls, messages),
        wru_per_msg_redelivery=at_latency.per_msg("again", lambda d: d.tally.wru),
        rru_per_msg_redelivery=at_latency.per_msg("again", lambda d: d.tally.rru),
        publishes_per_msg_first=publishes,
        publishes_per_msg_redelivery=at_latency.per_msg("again", lambda d: d.tally.publishes),
        sns_requests_per_msg=sns_requests,
        sqs_requests_per_msg=sqs_requests,
        calls_per_batch_first=statistics.median(d.tally.total_calls for d in at_latency.first),
        cold_start_ms=cold_start_ms,
        cold_start_cpu_ms=min(sample.start_cpu_ms for sample in cold_imports),
        billed_batch_ms=billed_batch_ms,
        moto_ms_per_call={
            "median": round(statistics.median(moto_ms), 3),
            "mean": round(statistics.fmean(moto_ms), 3),
            "p90": round(_percentile(moto_ms, 0.9), 3),
        },
        moto_ms_per_batch=statistics.median(sum(d.tally.moto_seconds) * 1000.0 for d in at_latency.first),
        # At 0 ms, the batch's time off the stand-in's clock is the consumer's CPU (its code, botocore's).
        consumer_cpu_ms_per_batch=at_zero.batch_ms("first"),
        batch10_ms_wall=at_latency.batch_ms("first", wall=True),
        per_1000_ms_wall=at_latency.per_thousand_ms(wall=True),
        stand_in_ms_per_batch=statistics.median(d.stand_in_ms for d in at_latency.first),
        log_bytes_per_msg=log_bytes,
        max_item_bytes=_max_item_bytes(at_latency),
        cost=cost,
        reconciler=reconciler,
        batch_samples_ms=[d.ms for d in at_latency.first],
        cold_import_samples_ms=[sample.wall_ms for sample in cold_imports],
        messages=messages + at_zero.messages,
        redelivered=messages + at_zero.messages,
    )


@dataclass(frozen=True)
class Target:
    """One of the issue's targets, checked in this run."""

    name: str
    met: bool
    detail: str


def _batch_ratio_target(
    name: str, limit: float, ours: SettingFigures, peer: SettingFigures, peer_name: str, memory_mb: int
) -> Target:
    ratio = ours.batch10_ms / peer.batch10_ms
    return Target(
        name=f"{name}: ours <= {limit:.2f}x {peer_name}",
        met=ratio <= limit,
        detail=(
            f"{ours.batch10_ms:.0f} / {peer.batch10_ms:.0f} ms = {ratio:.2f}x at {memory_mb} MB "
            f"(p90 {ours.batch10_p90_ms:.0f} vs {peer.batch10_p90_ms:.0f} ms)"
        ),
    )


def targets(results: dict[str, Figures], lambda_cpu: dict[int, MemoryFigures], default_memory_mb: int) -> list[Target]:
    """Issue 12's targets for ``ours`` against the peers of the same run, at the contract's latency."""
    ours, seed, powertools = results["ours"], results["seed"], results["powertools"]
    checks = []
    at_default = lambda_cpu.get(default_memory_mb)
    if at_default is not None:
        c = at_default.consumers
        label = f"batch of 10 at the default memory ({default_memory_mb} MB)"
        checks.append(_batch_ratio_target(label, MAX_BATCH_RATIO_SEED, c["ours"], c["seed"], "seed", default_memory_mb))
        checks.append(
            _batch_ratio_target(
                label, MAX_BATCH_RATIO_POWERTOOLS, c["ours"], c["powertools"], "powertools", default_memory_mb
            )
        )
    at_512 = lambda_cpu.get(512)
    if at_512 is not None:
        c = at_512.consumers
        checks.append(
            _batch_ratio_target("batch of 10 at 512 MB", MAX_BATCH_RATIO_SEED_512, c["ours"], c["seed"], "seed", 512)
        )
    if at_default is not None:
        cpu = at_default.consumers["ours"].cpu_ms_per_record
        checks.append(
            Target(
                name=f"CPU per record: ours <= {MAX_CPU_MS_PER_RECORD} ms",
                met=cpu <= MAX_CPU_MS_PER_RECORD,
                detail=(
                    f"ours {cpu:.2f} ms, seed {at_default.consumers['seed'].cpu_ms_per_record:.2f}, powertools "
                    f"{at_default.consumers['powertools'].cpu_ms_per_record:.2f} (median process CPU per batch / 10, "
                    f"at {default_memory_mb} MB)"
                ),
            )
        )
    checks.append(
        Target(
            name=f"calls per batch of 10 new orders: ours <= {MAX_CALLS_PER_BATCH_NEW}",
            met=ours.calls_per_batch_first <= MAX_CALLS_PER_BATCH_NEW,
            detail=f"ours {ours.calls_per_batch_first:g} ({_ops_text(ours.calls_first_by_operation)}), seed "
            f"{seed.calls_per_batch_first:g}, powertools {powertools.calls_per_batch_first:g} (moto, median)",
        )
    )
    checks.append(
        Target(
            name=f"batch of 10 duplicates: {REDELIVERY_CALLS} call per record",
            met=ours.calls_per_msg_redelivery <= REDELIVERY_CALLS,
            detail=f"ours {ours.calls_per_msg_redelivery:g}, seed {seed.calls_per_msg_redelivery:g}, "
            f"powertools {powertools.calls_per_msg_redelivery:g} calls per redelivered record",
        )
    )
    ratio = ours.usd_per_million / seed.usd_per_million
    checks.append(
        Target(
            name=f"USD per million orders at the default memory: ours <= {MAX_USD_RATIO_SEED:.2f}x seed",
            met=ratio <= MAX_USD_RATIO_SEED,
            detail=(
                f"${ours.usd_per_million:.4f} vs ${seed.usd_per_million:.4f} = {ratio:.2f}x at {default_memory_mb} MB "
                f"(powertools ${powertools.usd_per_million:.4f}; every line: the cost table); "
                + _usd_floor_text(ours, seed)
            ),
        )
    )
    start_ratio = ours.cold_start_ms / powertools.cold_start_ms
    checks.append(
        Target(
            name=f"cold start (import + clients): ours <= {MAX_COLD_START_RATIO_POWERTOOLS:.2f}x powertools consumer",
            met=start_ratio <= MAX_COLD_START_RATIO_POWERTOOLS,
            detail=(
                f"{ours.cold_start_ms:.0f} vs {powertools.cold_start_ms:.0f} ms = {start_ratio:.2f}x, min of "
                f"{len(ours.cold_import_samples_ms)} fresh interpreters (CPU {ours.cold_start_cpu_ms:.0f} vs "
                f"{powertools.cold_start_cpu_ms:.0f} ms; import alone {ours.cold_import_ms:.0f} vs "
                f"{powertools.cold_import_ms:.0f} ms)"
            ),
        )
    )
    return checks


#: The lines every consumer that writes the seed's transaction and sent mark pays whatever else it
#: does: those table writes, the producer's sends, the event source mapping's receives and deletes,
#: Lambda's requests.
FLOOR_LINES = ("dynamodb_table_writes", "sqs_producer_sends", "sqs_receives_and_deletes", "lambda_requests")


def _usd_floor_text(ours: Figures, seed: Figures) -> str:
    """What no design of ours can go below while it writes the same items (the ratio target's reach)."""
    floor = sum(seed.cost.as_dict()[line] for line in FLOOR_LINES)
    rest = ours.usd_per_million - sum(ours.cost.as_dict()[line] for line in FLOOR_LINES)
    return (
        f"the seed's transaction and mark plus the SQS and Lambda request lines cost ${floor:.4f} for any consumer "
        f"({MAX_USD_RATIO_SEED:.2f}x the seed is ${MAX_USD_RATIO_SEED * seed.usd_per_million:.4f}); "
        f"ours spends ${rest:.4f} on everything else"
    )


def _ops_text(by_operation: dict[str, float]) -> str:
    return " + ".join(f"{op} x{count * BATCH_SIZE:g}" for op, count in by_operation.items())


# --- the Lambda-CPU sweep ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingFigures:
    """One consumer at one memory size and latency (capped)."""

    batch10_ms: float
    batch10_p90_ms: float
    cpu_ms_per_record: float
    usd_per_million: float
    calls_per_batch: float

    def contract(self) -> dict[str, float]:
        return {
            "batch10_ms": round(self.batch10_ms, 1),
            "batch10_p90_ms": round(self.batch10_p90_ms, 1),
            "cpu_ms_per_record": round(self.cpu_ms_per_record, 2),
            "usd_per_million": round(self.usd_per_million, 4),
        }


@dataclass(frozen=True)
class MemoryFigures:
    """Every consumer at one memory size and latency."""

    memory_mb: int
    latency_ms: float
    cpu_share: float
    capped: bool
    consumers: dict[str, SettingFigures]

    def contract(self, names: tuple[str, ...] = LAMBDA_CPU_CONSUMERS) -> dict[str, Any]:
        latency: float | int = int(self.latency_ms) if float(self.latency_ms).is_integer() else self.latency_ms
        return {
            "cpu_share": round(self.cpu_share, 3),
            "capped": self.capped,
            "latency_ms_per_call": latency,
            "consumers": {name: self.consumers[name].contract() for name in names if name in self.consumers},
        }


def lambda_cpu(sweep: SweepResult, moto: dict[str, Figures], latency_ms: float) -> dict[int, MemoryFigures]:
    """Per memory size at ``latency_ms``: each consumer's capped batch times, CPU and USD per million.

    The USD figure bills the capped median batch time (and the cold start) at that memory, with every
    other line of the consumer's cost as at the default memory (:func:`figures`).
    """
    result = {}
    for memory, by_consumer in sweep.settings[latency_ms].items():
        consumers = {}
        for name, setting in by_consumer.items():
            if not setting.batches:
                continue
            fig = moto[name]
            cost = cost_per_million(
                wru_per_msg=fig.wru_per_msg,
                index_wru_per_msg=fig.index_wru_per_msg,
                rru_per_msg=fig.rru_per_msg,
                sns_requests_per_msg=fig.sns_requests_per_msg,
                sqs_requests_per_msg=fig.sqs_requests_per_msg,
                batch_ms=setting.median_ms,
                batch_size=BATCH_SIZE,
                memory_mb=memory,
                init_ms=fig.cold_start_ms,
                log_bytes_per_msg=fig.log_bytes_per_msg,
                reconciler=fig.reconciler,
            )
            consumers[name] = SettingFigures(
                batch10_ms=setting.median_ms,
                batch10_p90_ms=setting.p90_ms,
                cpu_ms_per_record=setting.cpu_ms_per_record,
                usd_per_million=cost.total,
                calls_per_batch=setting.calls_per_batch,
            )
        result[memory] = MemoryFigures(
            memory_mb=memory,
            latency_ms=latency_ms,
            cpu_share=cpu_share(memory),
            capped=sweep.capped,
            consumers=consumers,
        )
    return result


def components_per_record(
    shares: dict[str, dict[str, float]], cpu_ms_per_record: dict[str, float]
) -> dict[str, dict[str, float]]:
    """CPU ms per record by component: the profile's shares applied to the unprofiled CPU per record."""
    return {
        name: {component: round(share * cpu_ms_per_record[name], 3) for component, share in by_component.items()}
        for name, by_component in shares.items()
        if name in cpu_ms_per_record
    }


#: A memory size is "as fast as any" when its median batch is within this factor of the fastest one.
FAST_ENOUGH = 1.10


def recommend_memory(
    by_memory: dict[int, MemoryFigures], default_memory_mb: int, name: str = "ours"
) -> tuple[int, str]:
    """The smallest memory size at which ``name`` is within 10 % of its fastest batch, and why, in words.

    Past the point where the batch is CPU-bound, more memory buys no speed and costs more per order;
    below it, the batch stretches with the CPU share and the duration billed grows with it.
    """
    sizes = sorted(m for m, f in by_memory.items() if name in f.consumers)
    ms = {m: by_memory[m].consumers[name].batch10_ms for m in sizes}
    usd = {m: by_memory[m].consumers[name].usd_per_million for m in sizes}
    fastest = min(ms.values())
    chosen = next(m for m in sizes if ms[m] <= fastest * FAST_ENOUGH)
    cheapest = min(sizes, key=lambda m: usd[m])
    text = (
        f"the construct's default is {default_memory_mb} MB (`memory_size`); in this run {chosen} MB is the "
        f"smallest size at which ours runs a batch within {FAST_ENOUGH - 1:.0%} of its fastest "
        f"({ms[chosen]:.0f} ms vs {fastest:.0f} ms; {ms[sizes[0]]:.0f} ms at {sizes[0]} MB) for "
        f"${usd[chosen]:.3f} per million orders (cheapest: ${usd[cheapest]:.3f} at {cheapest} MB)"
    )
    if default_memory_mb in ms:
        text += f"; at the default: {ms[default_memory_mb]:.0f} ms and ${usd[default_memory_mb]:.3f} per million orders"
    cpu_batch = by_memory[sizes[-1]].consumers[name].cpu_ms_per_record * BATCH_SIZE
    if 512 in ms and 1769 in ms:
        text += (
            f". Why: the batch is CPU-bound (about {cpu_batch:.0f} ms of CPU per batch of 10, most of it botocore's), "
            f"so the CPU share decides its time: {ms[512]:.0f} ms at 512 MB (0.29 vCPU), {ms[1769]:.0f} ms at "
            f"1,769 MB (one vCPU), {ms[512] / ms[1769]:.1f}x faster for "
            f"{usd[1769] - usd[512]:+.3f} USD per million orders (the duration billed shrinks about as fast as "
            f"the price per millisecond grows)"
        )
        if 3008 in ms:
            text += (
                f"; at 3,008 MB it is {ms[3008]:.0f} ms, {usd[3008] - usd[1769]:+.3f} USD per million orders against "
                "1,769 MB (a second vCPU does little for one Python process)"
            )
    return chosen, text + "."


def calls_agreement(results: dict[str, Figures], by_memory: dict[int, MemoryFigures]) -> str:
    """Whether the HTTP stand-in saw the calls per batch of 10 new orders that moto counted, in words."""
    seen: dict[str, list[float]] = {}
    for figures in by_memory.values():
        for name, fig in figures.consumers.items():
            seen.setdefault(name, []).append(fig.calls_per_batch)
    differ = {
        name: (results[name].calls_per_batch_first, sorted(set(values)))
        for name, values in seen.items()
        if name in results and any(v != results[name].calls_per_batch_first for v in values)
    }
    if not differ:
        return (
            "The HTTP stand-in saw the calls per batch of 10 new orders that moto counted, for every consumer "
            f"({', '.join(f'{n} {results[n].calls_per_batch_first:g}' for n in seen if n in results)})."
        )
    return "Calls per batch DIFFER between moto and the HTTP stand-in: " + "; ".join(
        f"{name} moto {moto:g}, HTTP {http}" for name, (moto, http) in differ.items()
    )
