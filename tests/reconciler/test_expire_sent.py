"""A record marked ``sent`` without a ``ttl`` (0.1.0's mark, after a rollback) is given one by the
reconciler when it reads the entry, and never notified again; its index entry stays (no index
write); a pending record is never given one. And the index's reads of a sparse BatchGetItem answer."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import StoreUnavailableError
from idempotent_order_pipeline._lambda_asset.order_consumer.pending_records import PendingIndex
from idempotent_order_pipeline._lambda_asset.order_consumer.store import OrderStore
from tests.consumer.harness import ArmedFault, client_error
from tests.reconciler.harness import TTL_SECONDS, ReconcilerWorld, order

NOW = 1_800_000_000.0


def mark_sent_as_0_1_0(world: ReconcilerWorld, event_id: str, ttl: int | None = None) -> None:
    """0.1.0's mark: ``status = sent`` (and maybe a ttl), nothing else."""
    update = "SET #status = :sent" + (", #ttl = :ttl" if ttl is not None else "")
    values = {":sent": {"S": "sent"}} | ({":ttl": {"N": str(ttl)}} if ttl is not None else {})
    world.dynamodb.update_item(
        TableName=world.events_table,
        Key={"event_id": {"S": event_id}},
        UpdateExpression=update,
        ExpressionAttributeNames={"#status": "status"} | ({"#ttl": "ttl"} if ttl is not None else {}),
        ExpressionAttributeValues=values,  # type: ignore[arg-type]
    )


def test_sent_records_without_a_ttl_are_given_one_and_not_notified(world: ReconcilerWorld) -> None:
    # GIVEN two old records marked sent by 0.1.0, one with a ttl already, and one record truly pending
    without_ttl, with_ttl, pending = world.pend([order(1), order(2), order(3)], created_at=NOW - 7200)
    mark_sent_as_0_1_0(world, without_ttl)
    mark_sent_as_0_1_0(world, with_ttl, ttl=123)

    # WHEN the reconciler runs
    before = int(time.time())
    report = world.reconciler(reconcile_after_seconds=900, clock=lambda: NOW).run()
    after = int(time.time())

    # THEN the one without a ttl is counted and given the store's ttl from now, the other keeps its
    # own, only the pending one is notified, and every entry stays in the index (no index write)
    assert report.expired == 1
    assert report.reconciled == 1
    assert report.errors == []
    assert world.notified() == {pending: 1}
    records = world.records()
    assert before + TTL_SECONDS <= records[without_ttl]["ttl"] <= after + TTL_SECONDS
    assert records[with_ttl]["ttl"] == 123
    assert {records[event_id]["status"] for event_id in (without_ttl, with_ttl, pending)} == {"sent"}
    assert world.pending_in_index() == {without_ttl, with_ttl, pending}


def test_an_expiry_that_fails_is_reported_and_the_record_left_as_it_was(world: ReconcilerWorld) -> None:
    # GIVEN a sent record without a ttl, and DynamoDB throttling its expiry
    [event_id] = world.pend([order(1)], created_at=NOW - 7200)
    mark_sent_as_0_1_0(world, event_id)
    world.board.arm(ArmedFault(client_error("UpdateItem", "ThrottlingException", "slow down"), "update_item"))

    # WHEN the reconciler runs
    report = world.reconciler(reconcile_after_seconds=900, clock=lambda: NOW).run()

    # THEN nothing is counted, the error names the action, and the record keeps no ttl
    assert report.expired == 0
    assert report.errors == [
        "DynamoDB failed the expiry of a sent record without a ttl: ThrottlingException: slow down"
    ]
    assert "ttl" not in world.records()[event_id]


def test_an_expiry_never_touches_a_pending_record(world: ReconcilerWorld) -> None:
    # GIVEN a record still pending (not notified yet)
    [event_id] = world.pend([order(1)], created_at=NOW - 7200)
    store = OrderStore(
        client=world.dynamodb,
        processed_events_table=world.events_table,
        order_records_table=world.orders_table,
        record_ttl_seconds=TTL_SECONDS,
    )
    # WHEN an expiry is attempted on it (a run that read it as sent before a redelivery changed it)
    expired = store.expire_sent(event_id)
    # THEN nothing changed: it stays pending, indexed, without a ttl
    assert expired is False
    assert world.pending_in_index() == {event_id}
    assert world.records()[event_id]["status"] == "pending"
    assert "ttl" not in world.records()[event_id]


class AnswersWithoutTheTable:
    """A DynamoDB client whose BatchGetItem answers carry neither the table's responses nor UnprocessedKeys."""

    def batch_get_item(self, **_: Any) -> dict[str, Any]:
        return {"Responses": {}}


def test_an_answer_without_the_table_means_no_rows_and_nothing_left_unread() -> None:
    # GIVEN DynamoDB answers a read of two order rows with nothing for the table (neither rows nor keys left)
    index = PendingIndex(
        client=AnswersWithoutTheTable(),  # type: ignore[arg-type]
        processed_events_table="events",
        order_records_table="orders",
    )
    # WHEN the rows are read
    rows, unread = index.read_order_rows(["o-1", "o-2"])
    # THEN neither row exists and none is left unread (an absent table in Responses is no item)
    assert rows == {}
    assert unread == set()


def row(order_id: str) -> dict[str, Any]:
    return {"order_id": {"S": order_id}, "event_id": {"S": f"evt-{order_id}"}, "payload_sha256": {"S": "sha"}}


class AnswersInTwoParts:
    """A DynamoDB client whose BatchGetItem answers the first key, leaves the rest unprocessed, then answers them."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        keys = request["RequestItems"]["orders"]["Keys"]
        first, rest = keys[0], keys[1:]
        answer: dict[str, Any] = {"Responses": {"orders": [row(first["order_id"]["S"])]}}
        if rest:
            answer["UnprocessedKeys"] = {"orders": {**request["RequestItems"]["orders"], "Keys": rest}}
        return answer


def test_keys_left_unprocessed_are_asked_for_again_until_read() -> None:
    # GIVEN DynamoDB answers each BatchGetItem with its first key only, leaving the others unprocessed
    client = AnswersInTwoParts()
    index = PendingIndex(client=client, processed_events_table="events", order_records_table="orders")  # type: ignore[arg-type]
    # WHEN three rows are read
    rows, unread = index.read_order_rows(["o-1", "o-2", "o-3"])
    # THEN every row is read, none left unread, each call asking only for the keys still unread
    assert sorted(rows) == ["o-1", "o-2", "o-3"]
    assert unread == set()
    asked = [[key["order_id"]["S"] for key in r["RequestItems"]["orders"]["Keys"]] for r in client.requests]
    assert asked == [["o-1", "o-2", "o-3"], ["o-2", "o-3"], ["o-3"]]


class FailingQueries:
    """A DynamoDB client whose Query is throttled."""

    def query(self, **_: Any) -> None:
        raise client_error("Query", "ThrottlingException", "slow down")


def test_a_failed_index_query_is_a_store_failure_naming_the_shard() -> None:
    # GIVEN DynamoDB throttles the pending-index query
    index = PendingIndex(client=FailingQueries(), processed_events_table="events", order_records_table="orders")  # type: ignore[arg-type]
    # WHEN a shard's page is read
    with pytest.raises(StoreUnavailableError) as raised:
        index.page("7", created_from=Decimal(0), created_to=Decimal(NOW))
    # THEN the error names the query, the shard and DynamoDB's answer
    assert str(raised.value) == (
        "DynamoDB failed the pending-index query of shard 7: An error occurred (ThrottlingException) when calling"
        " the Query operation: slow down"
    )
