"""``python -m bench.schema``: what ``order_schema`` costs the consumer, per record and per batch of 10.

Two figures, for the closing note and ``docs/performance.md`` (a measurement, not a timed test):

* **Per record**: the generated validator (``idempotent_order_pipeline.order_schema``, the code the
  construct ships) checking a realistic order body (17 fields: money, a nested customer, line items,
  a shipping address, a date-time) against :data:`ORDER_SCHEMA`, in microseconds per record, next to
  the check's own parse of the same body (``parse_order``: fractions as exact Decimal; part of the check).
* **Per batch of 10**: the product's handler on the moto stand-in (:mod:`bench.run`, 0 ms per call so
  the CPU shows), first deliveries of batches of 10, with the validator in its asset package and
  without: the consumer's own milliseconds per batch (wall time less the stand-in's work), median.

Run: ``PYTHONPATH=.:lambdas:infra python -m bench.schema [--records N] [--batches N]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench import deployment
from bench.orders import OrderSource, batch_event
from bench.run import ByteCounter, StandIn, _deliver, quiet_logs

#: The asset package as Lambda (and the bench) loads it, and the generated validator's module in it.
PACKAGE = "order_consumer"
VALIDATOR = f"{PACKAGE}.order_schema_validator"

#: A realistic order schema (draft 2020-12) for :func:`order` bodies.
ORDER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["order_id", "customer", "created_at", "currency", "total", "lines", "shipping"],
    "additionalProperties": False,
    "properties": {
        "event_id": {"type": "string", "format": "uuid"},
        "order_id": {"type": "string", "pattern": "^ord-[0-9]{8}$"},
        "customer_id": {"type": "string"},
        "customer": {
            "type": "object",
            "required": ["id", "tier"],
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "tier": {"enum": ["gold", "silver", "bronze"]},
                "email": {"type": "string", "format": "email"},
            },
        },
        "channel": {"enum": ["web", "app", "store"]},
        "created_at": {"type": "string", "format": "date-time"},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "total": {"type": "number", "minimum": 0},
        "lines": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {
                "type": "object",
                "required": ["sku", "quantity", "unit_price"],
                "properties": {
                    "sku": {"type": "string", "pattern": "^SKU-[0-9]{5}$"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "unit_price": {"type": "number", "exclusiveMinimum": 0},
                },
            },
        },
        "shipping": {
            "type": "object",
            "required": ["country", "postcode"],
            "properties": {
                "country": {"type": "string", "minLength": 2, "maxLength": 2},
                "postcode": {"type": "string"},
            },
        },
    },
}
_TIERS = ("gold", "silver", "bronze")


def order(source: OrderSource, rng: random.Random) -> dict[str, Any]:
    """The bench's order with a nested customer and a channel (17 fields in all)."""
    placed = source.order()
    customer = {
        "id": placed["customer_id"],
        "tier": rng.choice(_TIERS),
        "email": f"{placed['customer_id']}@example.com",
    }
    return {**placed, "customer": customer, "channel": "web"}


@contextmanager
def validator_installed(installed: bool) -> Iterator[None]:
    """The generated validator as a pipeline's asset carries it (importable in the package), or not."""
    # The library only writes the code's text here; the module runs in the bench's own `order_consumer`.
    from order_consumer import handler

    from idempotent_order_pipeline.order_schema import validator_code

    if installed:
        module = types.ModuleType(VALIDATOR)
        module.__package__ = PACKAGE
        exec(compile(validator_code(ORDER_SCHEMA), VALIDATOR, "exec"), module.__dict__)  # noqa: S102 - ours
        sys.modules[VALIDATOR] = module
    handler.configure()  # the next invocation builds the pipeline again, finding the validator or not
    try:
        yield
    finally:
        sys.modules.pop(VALIDATOR, None)
        handler.configure()


def per_record(records: int, seed: int) -> dict[str, float]:
    """Microseconds per record: the whole check, and its parse of the body alone."""
    from idempotent_order_pipeline._lambda_asset.order_consumer.contract.order_schema import parse_order
    from idempotent_order_pipeline.order_schema import compile_order_schema

    rng = random.Random(seed)  # noqa: S311 - test data
    source = OrderSource(seed)
    bodies = [json.dumps(order(source, rng), separators=(",", ":")) for _ in range(records)]
    schema = compile_order_schema(ORDER_SCHEMA)
    for body in bodies[:100]:
        schema.check(body)  # warm, and every generated order must pass

    def best(work: Any) -> float:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for body in bodies:
                work(body)
            runs.append((time.perf_counter() - started) / len(bodies) * 1e6)
        return min(runs)

    return {
        "check_us": best(schema.check),
        "json_loads_us": best(parse_order),
        "body_bytes": statistics.mean(len(b) for b in bodies),
    }


def per_batch(batches: int, seed: int, latency_ms: float, block: int = 5) -> dict[str, float]:
    """The consumer's median milliseconds per first delivery of 10, without and with the schema.

    The two configurations alternate in blocks of ``block`` batches (after one unmeasured batch that
    builds the pipeline), so a drift of the machine's load weighs on both alike.
    """
    stand_in = StandIn(deployment.load())
    try:
        ours = stand_in.consumers["ours"]
        ours.configure()
        rng = random.Random(seed)  # noqa: S311 - test data
        source = OrderSource(seed)
        times: dict[bool, list[float]] = {False: [], True: []}
        sink = ByteCounter()
        while len(times[True]) < batches:
            for installed in (False, True):
                with validator_installed(installed), quiet_logs(sink):
                    for index in range(block + 1):
                        stand_in.fresh_tables(ours)
                        event = batch_event([order(source, rng) for _ in range(10)], rng)
                        delivery = _deliver(stand_in, ours, event, latency_ms, sink)
                        if delivery.failures:
                            raise AssertionError(f"{delivery.failures} records failed: the figures would be void")
                        if index:  # the first batch builds the pipeline (and imports the validator)
                            times[installed].append(delivery.ms)
        return {"without_ms": statistics.median(times[False]), "with_ms": statistics.median(times[True])}
    finally:
        stand_in.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.schema", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000, help="bodies checked per timing run (default 5000)")
    parser.add_argument("--batches", type=int, default=30, help="batches of 10 per configuration (default 30)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="round trip per AWS call (default 0)")
    parser.add_argument("--seed", type=int, default=7)
    arguments = parser.parse_args(argv)
    record = per_record(arguments.records, arguments.seed)
    batch = per_batch(arguments.batches, arguments.seed, arguments.latency_ms)
    print(
        f"per record ({record['body_bytes']:.0f}-byte body, 17 fields): check {record['check_us']:.1f} us "
        f"(parsing the body, fractions as Decimal, {record['json_loads_us']:.1f} us of it)"
    )
    print(
        f"per batch of 10 at {arguments.latency_ms:g} ms per call, consumer's own time, median of "
        f"{arguments.batches}: without schema {batch['without_ms']:.2f} ms, with {batch['with_ms']:.2f} ms"
    )
    print(json.dumps({"per_record": record, "per_batch": batch, "latency_ms": arguments.latency_ms}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
