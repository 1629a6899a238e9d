"""What one order costs in DynamoDB writes, counted from the calls the handler really makes.

The billing rules are the benchmark's (:mod:`bench.units`: 1 write unit per started KB for a
single write, 2 inside a transaction), plus the ``pending-by-age`` index: a global secondary index
is written (1 unit, keys only) when an item gains the index keys, loses them or changes one; the
sent mark changes neither, so it writes no index entry.
moto's ConsumedCapacity is a constant, so the units are counted from the requests instead.
"""

from __future__ import annotations

from typing import Any

from bench.units import item_size, write_units
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
)
from tests.consumer.harness import World, sqs_record, statement_event_id


def table_and_index_units(world: World) -> tuple[float, float]:
    """Write units of every DynamoDB request the handler made: (table, pending index)."""
    table = index = 0.0
    for request in world.board.requests.get("transact_write_items", []):
        for entry in request["TransactItems"]:
            ((kind, write),) = entry.items()
            assert kind == "Put", f"an unexpected transactional {kind}"
            table += write_units(item_size(write["Item"]), transactional=True)
            index += PENDING_SHARD_ATTRIBUTE in write["Item"]  # the item enters the index (every call here succeeds)
    stored = raw_event_records(world)
    for call in world.board.requests.get("batch_execute_statement", []):
        for statement in call["Statements"]:
            after = stored[statement_event_id(statement)]
            # billed on the larger of the item before and after: before, it was "pending", no sent_at/ttl
            before_bound = item_size(after) + len("pending") - len("sent")
            table += write_units(max(item_size(after), before_bound))
            # an index write only if the mark names an index key (it leaves, or moves in, the index)
            index += any(key in statement["Statement"] for key in (PENDING_SHARD_ATTRIBUTE, PENDING_SINCE_ATTRIBUTE))
    assert set(world.board.calls) <= {"transact_write_items", "batch_execute_statement", "publish_batch"}
    return table, index


def raw_event_records(world: World) -> dict[str, dict[str, Any]]:
    items = world.dynamodb.scan(TableName=world.events_table, ConsistentRead=True)["Items"]
    return {item["event_id"]["S"]: item for item in items}


def test_a_new_order_costs_five_table_write_units_and_one_index_write(world: World) -> None:
    # GIVEN ten new orders
    records = [sqs_record({"order_id": f"o-{i}", "event_id": f"evt-{i}", "amount": i}) for i in range(10)]
    # WHEN delivered in one batch
    assert world.invoke(records) == {"batchItemFailures": []}
    # THEN each order cost: its transaction (2 items x 2 units), its sent mark (one conditional
    # PartiQL UPDATE, 1 unit), and the pending index's entry written once (1 unit)
    table, index = table_and_index_units(world)
    assert (table / len(records), index / len(records)) == (5.0, 1.0)
    # AND every record is sent, its index entry still there (until TTL deletes the record)
    assert all(r["status"]["S"] == "sent" for r in raw_event_records(world).values())
    assert all(PENDING_SHARD_ATTRIBUTE in r and PENDING_SINCE_ATTRIBUTE in r for r in raw_event_records(world).values())
