"""From samples to figures: per consumer, the contract's nine figures and the details behind them."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.coldstart import ImportTime
from bench.prices import OrderCost, cost_per_million
from bench.run import BATCH_SIZE, Samples

#: Issue 7's targets, "ours" against the peers in the same run.
MAX_BATCH_RATIO = 0.35
REDELIVERY_CALLS = 1

OPERATION_ABBREVIATIONS = {
    "TransactWriteItems": "TxWrite",
    "PutItem": "Put",
    "UpdateItem": "Update",
    "GetItem": "Get",
    "Publish": "Publish",
    "SendMessage": "SendMessage",
}


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
            "duplicate_rows": self.duplicate_rows,
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
            "moto_ms_per_call": self.moto_ms_per_call,
            "moto_ms_per_batch": round(self.moto_ms_per_batch, 1),
            "stand_in_ms_per_batch": round(self.stand_in_ms_per_batch, 1),
            "batch10_ms_wall_with_stand_in": round(self.batch10_ms_wall, 1),
            "per_1000_ms_wall_with_stand_in": round(self.per_1000_ms_wall, 1),
            "consumer_cpu_ms_per_batch": round(self.consumer_cpu_ms_per_batch, 1),
            "log_bytes_per_msg": round(self.log_bytes_per_msg, 1),
            "max_item_bytes": self.max_item_bytes,
            "cold_import_cpu_ms": round(self.cold_import_cpu_ms, 1),
            "usd_per_million_by_line": {k: round(v, 4) for k, v in self.cost.as_dict().items()},
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
) -> Figures:
    """The figures of one consumer from its samples at the configured latency and at 0 ms."""
    messages = at_latency.messages
    wru = at_latency.per_msg("first", lambda d: d.tally.wru)
    rru = at_latency.per_msg("first", lambda d: d.tally.rru)
    publishes = at_latency.per_msg("first", lambda d: d.tally.publishes)
    batch_ms = at_latency.batch_ms("first")
    cost = cost_per_million(
        wru_per_msg=wru,
        rru_per_msg=rru,
        publishes_per_msg=publishes,
        batch_ms=batch_ms,
        batch_size=BATCH_SIZE,
        memory_mb=memory_mb,
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
        log_bytes_per_msg=at_latency.per_msg("first", lambda d: d.log_bytes),
        max_item_bytes=_max_item_bytes(at_latency),
        cost=cost,
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


def targets(results: dict[str, Figures]) -> list[Target]:
    """Issue 7's targets for ``ours`` against the peers of the same run."""
    ours, seed, powertools = results["ours"], results["seed"], results["powertools"]
    checks = []
    for peer in (seed, powertools):
        ratio = ours.batch10_ms / peer.batch10_ms
        wall_ratio = ours.batch10_ms_wall / peer.batch10_ms_wall
        # Batch i of every consumer ran within a second of the others, on the same orders.
        paired = [mine / theirs for mine, theirs in zip(ours.batch_samples_ms, peer.batch_samples_ms, strict=True)]
        within = sum(r <= MAX_BATCH_RATIO for r in paired)
        checks.append(
            Target(
                name=f"batch of 10: ours <= {MAX_BATCH_RATIO}x {peer.name}",
                met=ratio <= MAX_BATCH_RATIO,
                detail=(
                    f"{ours.batch10_ms:.1f} / {peer.batch10_ms:.1f} ms = {ratio:.2f}x; batch by batch: median "
                    f"{statistics.median(paired):.2f}x, {within} of {len(paired)} batches within; "
                    f"{wall_ratio:.2f}x with the stand-in's work on the clock"
                ),
            )
        )
    checks.append(
        Target(
            name=f"redelivery of a processed message: {REDELIVERY_CALLS} API call",
            met=ours.calls_per_msg_redelivery <= REDELIVERY_CALLS,
            detail=f"ours {ours.calls_per_msg_redelivery:g}, seed {seed.calls_per_msg_redelivery:g}",
        )
    )
    checks.append(
        Target(
            name="USD per million orders: ours <= seed",
            met=ours.usd_per_million <= seed.usd_per_million,
            detail=(
                f"${ours.usd_per_million:.4f} vs ${seed.usd_per_million:.4f}; "
                f"premium over powertools ${ours.usd_per_million - powertools.usd_per_million:+.4f} "
                f"(DynamoDB writes {ours.cost.dynamodb_writes - powertools.cost.dynamodb_writes:+.4f}, "
                f"Lambda duration {ours.cost.lambda_duration - powertools.cost.lambda_duration:+.4f})"
            ),
        )
    )
    checks.append(
        Target(
            name="cold import: ours <= powertools consumer",
            met=ours.cold_import_ms <= powertools.cold_import_ms,
            detail=(
                f"{ours.cold_import_ms:.1f} vs {powertools.cold_import_ms:.1f} ms, min of "
                f"{len(ours.cold_import_samples_ms)} (CPU time {ours.cold_import_cpu_ms:.1f} vs "
                f"{powertools.cold_import_cpu_ms:.1f} ms)"
            ),
        )
    )
    return checks
