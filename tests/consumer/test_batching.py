"""Batched notification I/O: call counts, partial PublishBatch failures, crashes between publish and mark, FIFO."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import StoreUnavailableError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import OrderMessage
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import FIFO_ID as SNS_FIFO_ID
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import sns_deduplication_id, sns_group_id
from idempotent_order_pipeline._lambda_asset.order_consumer.notifier import Notification, Notifier
from idempotent_order_pipeline._lambda_asset.order_consumer.pipeline import _fits, _Parsed
from idempotent_order_pipeline._lambda_asset.order_consumer.store import (
    EVENT_IS_NEW,
    EVENT_RECORD_BYTES,
    MARK_SENT_STATEMENT,
    MAX_RECORDS_PER_TRANSACTION,
    MAX_TRANSACTION_BYTES,
    ORDER_IS_NEW,
    STILL_PENDING_OTHER_CONTENT,
    OrderStore,
)
from tests.consumer.harness import (
    ArmedFault,
    Crash,
    World,
    client_error,
    is_mark,
    marked_event_ids,
    refuse_entries,
    refuse_statements,
    seed,
    sqs_record,
    statement_event_id,
    written_event_ids,
    written_order_ids,
)


def new_orders(count: int, prefix: str = "o", **fields: Any) -> list[dict[str, Any]]:
    return [sqs_record({"order_id": f"{prefix}-{i}", "event_id": f"evt-{prefix}-{i}", **fields}) for i in range(count)]


def event_of(entry: dict[str, Any]) -> str:
    return str(json.loads(entry["Message"])["event_id"])


def test_a_batch_of_ten_new_orders_makes_one_transaction_one_publish_and_one_mark_call(world: World) -> None:
    # GIVEN ten new orders
    records = new_orders(10)
    # WHEN delivered in one batch
    response = world.invoke(records)
    # THEN all are acknowledged, sent and notified once
    assert response == {"batchItemFailures": []}
    assert {e: r["status"] for e, r in world.event_records().items()} == {f"evt-o-{i}": "sent" for i in range(10)}
    assert sorted(world.notified_events().values()) == [1] * 10
    # AND the calls were: one transaction of the ten records (two conditional puts each), one PublishBatch
    # of ten entries, one BatchExecuteStatement of ten conditional marks (each statement's WHERE is its
    # own record's condition)
    assert world.board.calls == {"transact_write_items": 1, "publish_batch": 1, "batch_execute_statement": 1}
    [transaction] = world.board.requests["transact_write_items"]
    assert len(transaction["TransactItems"]) == 20
    conditions = {item["Put"]["ConditionExpression"] for item in transaction["TransactItems"]}
    assert conditions == {EVENT_IS_NEW, ORDER_IS_NEW}
    [publish] = world.board.requests["publish_batch"]
    assert len(publish["PublishBatchRequestEntries"]) == 10
    marks = world.board.requests["batch_execute_statement"]
    assert sorted(marked_event_ids(marks)) == sorted(f"evt-o-{i}" for i in range(10))
    [call] = marks
    assert all(s["Statement"] == MARK_SENT_STATEMENT.format(table=world.events_table) for s in call["Statements"])


def test_a_batch_of_ten_duplicates_makes_one_call(world: World) -> None:
    # GIVEN ten orders already recorded and sent
    for i in range(10):
        seed(world, {"order_id": f"o-{i}"}, status="sent", event_id=f"evt-o-{i}")
    # WHEN they are delivered again
    response = world.invoke([sqs_record({"order_id": f"o-{i}", "event_id": f"evt-o-{i}"}) for i in range(10)])
    # THEN they are acknowledged with one transaction (cancelled: each record's reasons say it exists) and
    # nothing else
    assert response == {"batchItemFailures": []}
    assert world.board.calls == {"transact_write_items": 1}
    assert world.new_notifications() == []


def test_a_batch_of_25_new_orders_publishes_in_calls_of_ten(world: World) -> None:
    # GIVEN 25 new orders
    response = world.invoke(new_orders(25))
    # THEN one transaction of the 25 records (50 puts: half of DynamoDB's 100 actions), three PublishBatch
    # calls (10, 10, 5) and one mark statement per order, all 25 in one call
    assert response == {"batchItemFailures": []}
    sizes = sorted(len(r["PublishBatchRequestEntries"]) for r in world.board.requests["publish_batch"])
    assert sizes == [5, 10, 10]
    assert world.board.calls == {"transact_write_items": 1, "publish_batch": 3, "batch_execute_statement": 1}
    assert len(world.board.requests["transact_write_items"][0]["TransactItems"]) == 50
    assert len(marked_event_ids(world.board.requests["batch_execute_statement"])) == 25
    assert len(world.notified_events()) == 25


def test_a_transaction_takes_at_most_25_records_and_the_next_one_the_rest(world: World) -> None:
    # GIVEN 26 new orders
    response = world.invoke(new_orders(MAX_RECORDS_PER_TRANSACTION + 1))
    # THEN two transactions, of 25 records (50 puts) and of 1, and every order recorded and sent
    assert response == {"batchItemFailures": []}
    sizes = [len(r["TransactItems"]) for r in world.board.requests["transact_write_items"]]
    assert sorted(sizes) == [2, 2 * MAX_RECORDS_PER_TRANSACTION]
    assert {r["status"] for r in world.event_records().values()} == {"sent"}
    assert len(world.order_rows()) == MAX_RECORDS_PER_TRANSACTION + 1


def test_a_transaction_stays_under_dynamodb_s_4_mb_of_items() -> None:
    # GIVEN records parsed with rows of 390 KB each (the byte budget lets a lane hold that much only when
    # it is configured above its default; the rule holds whatever the budget)
    def parsed(n: int, size: int) -> _Parsed:
        message = OrderMessage(f"evt-{n}", f"o-{n}", "0" * 64, {}, item_bytes=size)
        return _Parsed(n, message, share=0)

    chunk = [parsed(n, 390_000) for n in range(10)]
    # WHEN a tenth joins nine (3.5 MB of rows, with the records' allowance)
    # THEN it fits under MAX_TRANSACTION_BYTES; an eleventh would not
    assert _fits(chunk[:9], chunk[9].message)
    assert sum(p.message.item_bytes + EVENT_RECORD_BYTES for p in chunk) + 390_000 > MAX_TRANSACTION_BYTES
    assert not _fits(chunk, parsed(10, 390_000).message)
    # AND a record over the limit on its own still starts a transaction (DynamoDB then answers for it)
    assert _fits([], parsed(11, MAX_TRANSACTION_BYTES + 1).message)
    # AND a transaction never names an event id or an order id twice
    assert not _fits([parsed(1, 10)], OrderMessage("evt-1", "o-other", "0" * 64, {}, item_bytes=10))
    assert not _fits([parsed(1, 10)], OrderMessage("evt-other", "o-1", "0" * 64, {}, item_bytes=10))


def test_a_record_whose_keys_are_already_in_the_transaction_waits_for_the_next(world: World) -> None:
    # GIVEN a batch where one order is sent twice under two event ids, and one message twice
    records = [
        sqs_record({"order_id": "o-a", "event_id": "evt-a"}),
        sqs_record({"order_id": "o-a", "event_id": "evt-a2", "amount": 1}),  # o-a's row under another key
        sqs_record({"order_id": "o-b", "event_id": "evt-b"}),
        sqs_record({"order_id": "o-b", "event_id": "evt-b"}),  # the same message again
    ]
    # WHEN processed
    response = world.invoke(records)
    # THEN no transaction names an item twice (DynamoDB refuses that): three transactions in order
    transactions = world.board.requests["transact_write_items"]
    # (evt-a; evt-a2 with evt-b, cancelled by o-a's existing row; evt-b asked again alone; its copy)
    assert [written_event_ids(r) for r in transactions] == [["evt-a"], ["evt-a2", "evt-b"], ["evt-b"], ["evt-b"]]
    # AND evt-a2 is parked as a conflict on o-a's row, and the others are recorded once
    assert world.failures(response) == set()
    assert world.order_rows()["o-a"]["event_id"] == "evt-a"
    assert set(world.order_rows()) == {"o-a", "o-b"}
    codes = [m["MessageAttributes"]["error_code"]["StringValue"] for m in world.dead_letters()]
    assert codes == ["IDEMPOTENCY_CONFLICT"]


def test_a_transaction_refused_as_a_whole_is_retried_record_by_record(world: World) -> None:
    # GIVEN DynamoDB refuses every transaction of more than one record as invalid (naming no record),
    # and o-bad's alone too
    refused = client_error("TransactWriteItems", "ValidationException", "One or more parameter values were invalid")
    world.board.arm(ArmedFault(refused, "transact_write_items", when=lambda r: len(r["TransactItems"]) > 2))
    world.board.arm(ArmedFault(refused, "transact_write_items", when=lambda r: written_order_ids(r) == ["o-bad"]))
    records = [sqs_record({"order_id": o, "event_id": f"evt-{o}"}) for o in ("o-1", "o-bad", "o-2")]
    # WHEN processed
    response = world.invoke(records)
    # THEN each record was written on its own: o-1 and o-2 recorded and sent, o-bad parked as refused
    assert world.failures(response) == set()
    assert set(world.order_rows()) == {"o-1", "o-2"}
    assert {e: r["status"] for e, r in world.event_records().items()} == {"evt-o-1": "sent", "evt-o-2": "sent"}
    codes = [m["MessageAttributes"]["error_code"]["StringValue"] for m in world.dead_letters()]
    assert codes == ["STORE_REJECTED"] or (len(codes) == 1 and codes[0] != "IDEMPOTENCY_CONFLICT"), codes
    assert world.board.calls["transact_write_items"] == 4


def test_one_refused_entry_leaves_only_its_record_pending_and_reported(world: World) -> None:
    # GIVEN SNS refuses the entry of evt-o-3 (once)
    records = new_orders(5)
    world.board.rewrites["publish_batch"] = refuse_entries(lambda entry: event_of(entry) == "evt-o-3")
    # WHEN the batch is processed
    response = world.invoke(records)
    # THEN only that record is reported, stays pending and was not notified
    assert world.failures(response) == {records[3]["messageId"]}
    states = world.event_records()
    assert states["evt-o-3"]["status"] == "pending"
    assert "pending_shard" in states["evt-o-3"]
    assert "ttl" not in states["evt-o-3"]
    notified = world.notified_events()
    assert notified["evt-o-3"] == 0
    # AND the others were notified, marked sent and acknowledged (never marked: the refused entry)
    assert all(states[f"evt-o-{i}"]["status"] == "sent" for i in (0, 1, 2, 4))
    assert all(notified[f"evt-o-{i}"] == 1 for i in (0, 1, 2, 4))
    assert sorted(marked_event_ids(world.board.requests["batch_execute_statement"])) == [
        "evt-o-0",
        "evt-o-1",
        "evt-o-2",
        "evt-o-4",
    ]
    # AND the redelivery publishes and marks it
    del world.board.rewrites["publish_batch"]
    assert world.invoke([records[3]]) == {"batchItemFailures": []}
    assert world.event_records()["evt-o-3"]["status"] == "sent"
    assert world.notified_events()["evt-o-3"] == 1


def test_every_entry_refused_leaves_every_record_pending_and_makes_no_mark(world: World) -> None:
    # GIVEN SNS refuses every entry
    records = new_orders(4)
    world.board.rewrites["publish_batch"] = refuse_entries(lambda entry: True)
    # WHEN the batch is processed
    response = world.invoke(records)
    # THEN every record is reported and pending, nothing was notified, no mark call was made
    assert world.failures(response) == {r["messageId"] for r in records}
    assert {r["status"] for r in world.event_records().values()} == {"pending"}
    assert world.new_notifications() == []
    assert world.board.calls == {"transact_write_items": 1, "publish_batch": 1}


def test_a_failed_publish_batch_call_fails_only_its_records(world: World) -> None:
    # GIVEN 12 new orders (two PublishBatch calls) and the first call fails
    records = new_orders(12)
    world.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), "publish_batch", times=1))
    # WHEN the batch is processed
    response = world.invoke(records)
    # THEN exactly the records of the failed call are reported and pending; the others are sent
    failed = world.failures(response)
    [first, _] = world.board.requests["publish_batch"]
    failed_events = {event_of(e) for e in first["PublishBatchRequestEntries"]}
    assert failed == {r["messageId"] for r in records if json.loads(r["body"])["event_id"] in failed_events}
    states = world.event_records()
    assert {e for e, r in states.items() if r["status"] == "pending"} == failed_events
    assert set(world.notified_events()) == set(states) - failed_events


def test_an_entry_sns_does_not_report_is_never_marked_sent(world: World) -> None:
    # GIVEN SNS answers without a word about one entry (neither Successful nor Failed; moto does
    # this when an entry raises anything but InvalidParameterValue)
    records = new_orders(3)

    def drop_report(request: dict[str, Any], send: Callable[..., Any]) -> Any:
        response = send(**request)
        return {**response, "Successful": [s for s in response["Successful"] if s["Id"] != "1"]}

    world.board.rewrites["publish_batch"] = drop_report
    # WHEN processed
    response = world.invoke(records)
    # THEN that record is reported and stays pending (its notification may have gone out: at least once)
    assert world.failures(response) == {records[1]["messageId"]}
    assert world.event_records()["evt-o-1"]["status"] == "pending"
    assert world.event_records()["evt-o-0"]["status"] == "sent"


# Factories, not faults: an ArmedFault counts its firings, and a test run twice in one process (mutmut
# does) must arm a fresh one.
@pytest.mark.parametrize(
    "make_fault",
    [
        pytest.param(
            lambda: ArmedFault(Crash("after publish"), "publish_batch", after_success=True, times=1),
            id="after-publish",
        ),
        pytest.param(
            lambda: ArmedFault(Crash("before mark"), "batch_execute_statement", when=is_mark, times=1), id="before-mark"
        ),
    ],
)
def test_a_crash_between_the_publish_and_the_mark_republishes_on_redelivery(
    world: World, make_fault: Callable[[], ArmedFault]
) -> None:
    # GIVEN the process dies after SNS accepted the notifications and before they were marked sent
    records = new_orders(3)
    fault = world.board.arm(make_fault())
    # WHEN SQS redelivers the batch until it is acknowledged
    crashes = world.deliver_until_done(records)
    # THEN it crashed once, every record ends sent, with exactly one row per order
    assert crashes == 1
    assert {r["status"] for r in world.event_records().values()} == {"sent"}
    assert sorted(world.order_rows()) == ["o-0", "o-1", "o-2"]
    # AND each was notified twice: its mark was not made before the crash (the marks are one call)
    notified = world.notified_events()
    assert fault.fired == 1
    assert notified == {f"evt-o-{i}": 2 for i in range(3)}


def test_a_mark_that_fails_leaves_notified_records_pending_and_reported(world: World) -> None:
    # GIVEN every mark fails (throttled) after SNS accepted every entry
    records = new_orders(3)
    world.board.arm(
        ArmedFault(
            client_error("BatchExecuteStatement", "ThrottlingException"), "batch_execute_statement", when=is_mark
        )
    )
    # WHEN processed
    response = world.invoke(records)
    # THEN every record is reported, pending, and was notified (the redelivery notifies again)
    assert world.failures(response) == {r["messageId"] for r in records}
    assert {r["status"] for r in world.event_records().values()} == {"pending"}
    assert len(world.notified_events()) == 3


def test_several_parked_records_go_in_one_send_message_batch_and_a_refused_one_is_retried(world: World) -> None:
    # GIVEN three invalid messages and SQS refuses to take the second into the DLQ
    records = [sqs_record("not json"), sqs_record("[]"), sqs_record("{}")]
    refused = records[1]["messageId"]
    world.board.rewrites["send_message_batch"] = refuse_entries(
        lambda entry: entry["MessageAttributes"]["source_message_id"]["StringValue"] == refused
    )
    # WHEN processed
    response = world.invoke(records)
    # THEN one SendMessageBatch call; the refused record is reported, the two others parked with their reason
    assert world.board.calls == {"send_message_batch": 1}
    assert world.failures(response) == {refused}
    parked = world.dead_letters()
    assert sorted(m["MessageAttributes"]["source_message_id"]["StringValue"] for m in parked) == sorted(
        [records[0]["messageId"], records[2]["messageId"]]
    )
    assert {m["MessageAttributes"]["error_code"]["StringValue"] for m in parked} == {"INVALID_MESSAGE"}


# --- FIFO ---------------------------------------------------------------------------------------


def test_fifo_notifications_of_a_group_keep_their_order_in_one_publish_batch(make_world: Any) -> None:
    # GIVEN a FIFO queue and topic, one message group with five orders (some ids SNS would refuse raw)
    world = make_world(fifo=True)
    order_ids = ["a-0", "with space", "ünïcode", "x" * 200, "a-4"]
    records = [sqs_record({"order_id": o, "event_id": f"e-{i}"}, group="g") for i, o in enumerate(order_ids)]
    # WHEN processed
    response = world.invoke(records)
    # THEN all are acknowledged and sent, in one PublishBatch whose entries keep the group's order
    assert response == {"batchItemFailures": []}
    [publish] = world.board.requests["publish_batch"]
    entries = publish["PublishBatchRequestEntries"]
    assert [event_of(e) for e in entries] == [f"e-{i}" for i in range(5)]
    # AND every entry carries valid FIFO ids: the group from the order, the deduplication id from the event
    assert [e["MessageGroupId"] for e in entries] == [sns_group_id(o) for o in order_ids]
    assert [e["MessageDeduplicationId"] for e in entries] == [sns_deduplication_id(f"e-{i}") for i in range(5)]
    assert all(SNS_FIFO_ID.fullmatch(e["MessageGroupId"]) for e in entries)
    assert all(SNS_FIFO_ID.fullmatch(e["MessageDeduplicationId"]) for e in entries)
    # AND the subscriber received them in that order
    assert [json.loads(n["Message"])["event_id"] for n in world.new_notifications()] == [f"e-{i}" for i in range(5)]


@pytest.mark.parametrize("order_id", ["has a space", "ordér-ü", "o" * 200], ids=["space", "non-ascii", "200-chars"])
def test_a_fifo_order_with_an_id_sns_refuses_raw_is_notified_and_marked_sent(make_world: Any, order_id: str) -> None:
    # GIVEN a FIFO pipeline and an order id that is not a valid SNS group id as is
    world = make_world(fifo=True)
    assert not SNS_FIFO_ID.fullmatch(order_id)
    # WHEN it is delivered
    response = world.invoke([sqs_record({"order_id": order_id, "event_id": "evt-fifo"}, group="g1")])
    # THEN it is acknowledged, marked sent and notified, with a valid group id
    assert response == {"batchItemFailures": []}
    assert world.event_records()["evt-fifo"]["status"] == "sent"
    [notification] = world.new_notifications()
    assert json.loads(notification["Message"])["order_id"] == order_id
    [entry] = world.board.requests["publish_batch"][0]["PublishBatchRequestEntries"]
    assert SNS_FIFO_ID.fullmatch(entry["MessageGroupId"])
    assert entry["MessageGroupId"] == sns_group_id(order_id) != order_id


def test_fifo_a_refused_entry_keeps_the_rest_of_its_group_unacknowledged(make_world: Any) -> None:
    # GIVEN one FIFO group of three and SNS refuses the middle entry once
    world = make_world(fifo=True)
    records = [sqs_record({"order_id": f"g-{i}", "event_id": f"e-{i}"}, group="g") for i in range(3)]
    world.board.rewrites["publish_batch"] = refuse_entries(lambda entry: event_of(entry) == "e-1")
    # WHEN processed
    response = world.invoke(records)
    # THEN the first is acknowledged; the refused one and the one after it are not
    assert world.failures(response) == {records[1]["messageId"], records[2]["messageId"]}
    states = world.event_records()
    assert states["e-0"]["status"] == "sent"
    assert states["e-1"]["status"] == "pending"
    # AND the redelivery of the two completes them, in order
    del world.board.rewrites["publish_batch"]
    assert world.invoke(records[1:]) == {"batchItemFailures": []}
    assert {e: r["status"] for e, r in world.event_records().items()} == {"e-0": "sent", "e-1": "sent", "e-2": "sent"}


# --- the interfaces the reconciler uses -----------------------------------------------------------


def test_notifier_holds_back_a_fifo_group_after_a_refused_entry(make_world: Any) -> None:
    # GIVEN a FIFO topic and 12 notifications of one order (one group), the fourth of which SNS refuses
    world = make_world(fifo=True)
    notifier = Notifier(client=world.clients.sns, topic_arn=world.topic_arn)
    notifications = [Notification(f"e-{i}", "o-1", "0" * 64) for i in range(12)]
    world.board.rewrites["publish_batch"] = refuse_entries(lambda entry: event_of(entry) == "e-3")
    # WHEN published
    results = notifier.publish_batch(notifications)
    # THEN one result per input in order: the refused one is an error; the others of the same call
    # were accepted by SNS (they are reported as such); the group's entries of the next call are held
    assert [r.notification for r in results] == notifications
    assert [r.ok for r in results] == [True] * 3 + [False] + [True] * 6 + [False] * 2
    assert all(r.message_id for r in results[:3])
    assert "refused" in (results[3].error or "")
    assert all("earlier notification of its message group" in (r.error or "") for r in results[10:])
    # AND the second call (entries 10 and 11) was never made: the whole group was held
    assert world.board.calls == {"publish_batch": 1}


def test_notifier_holds_back_only_the_group_of_a_refused_entry(make_world: Any) -> None:
    # GIVEN a FIFO topic and 12 notifications: o-1's five, o-2's five (SNS refuses o-2's second), then one more of each
    world = make_world(fifo=True)
    notifier = Notifier(client=world.clients.sns, topic_arn=world.topic_arn)
    orders = ["o-1"] * 5 + ["o-2"] * 5 + ["o-1", "o-2"]
    notifications = [Notification(f"e-{i}", order_id, "0" * 64) for i, order_id in enumerate(orders)]
    world.board.rewrites["publish_batch"] = refuse_entries(lambda entry: event_of(entry) == "e-6")
    # WHEN published (ten in the first call, two in the second)
    results = notifier.publish_batch(notifications)
    # THEN o-1's last notification goes out in the second call; o-2's is held behind the refused one
    assert [r.ok for r in results] == [True] * 6 + [False] + [True] * 4 + [False]
    assert "earlier notification of its message group" in (results[11].error or "")
    assert [event_of(e) for e in world.board.requests["publish_batch"][1]["PublishBatchRequestEntries"]] == ["e-10"]


def test_notifier_never_exceeds_256_kb_per_call(world: World) -> None:
    # GIVEN three notifications of about 100 KB each (huge event ids)
    notifier = Notifier(client=world.clients.sns, topic_arn=world.topic_arn)
    notifications = [Notification(f"{i}" + "e" * 50_000, "o", "0" * 64) for i in range(3)]
    # WHEN published
    results = notifier.publish_batch(notifications)
    # THEN all are accepted, in two calls, each under 256 KB
    assert all(r.ok for r in results)
    sizes = [len(r["PublishBatchRequestEntries"]) for r in world.board.requests["publish_batch"]]
    assert sizes == [2, 1]


class AnsweringSns:
    """An SNS client whose PublishBatch gives one fixed answer, or raises ``error``, whatever the entries."""

    def __init__(self, answer: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.answer, self.error = answer, error

    def publish_batch(self, **_: Any) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        assert self.answer is not None
        return self.answer


def test_notifier_ignores_entry_ids_sns_was_not_sent_and_names_each_refusal() -> None:
    # GIVEN SNS answers a call of three (ids "0", "1", "2") accepting "0", refusing "2" and an id it was not sent
    sns = AnsweringSns(
        {
            "Successful": [{"Id": "0", "MessageId": "m-0"}],
            "Failed": [{"Id": "2", "Code": "InternalError", "Message": "try again"}, {"Id": "9", "Code": "X"}],
        }
    )
    notifications = [Notification(f"e-{i}", "o", "0" * 64) for i in range(3)]
    # WHEN the three are published
    results = Notifier(client=sns, topic_arn="arn:aws:sns:eu-west-1:1:t").publish_batch(notifications)  # type: ignore[arg-type]
    # THEN one result per notification, in order: accepted, not reported (never assumed sent), refused with
    # SNS's code and message; the unknown id changed nothing
    assert [(r.notification, r.message_id, r.error) for r in results] == [
        (notifications[0], "m-0", None),
        (notifications[1], None, "SNS did not report the entry"),
        (notifications[2], None, "SNS refused the entry: InternalError: try again"),
    ]


def test_notifier_turns_an_unforeseen_sdk_error_into_a_result_per_notification() -> None:
    # GIVEN an SNS client raising an error that is not botocore's
    sns = AnsweringSns(error=RuntimeError("boom"))
    notifications = [Notification(f"e-{i}", "o", "0" * 64) for i in range(2)]
    # WHEN two are published
    results = Notifier(client=sns, topic_arn="arn:aws:sns:eu-west-1:1:t").publish_batch(notifications)  # type: ignore[arg-type]
    # THEN each has a result naming the error, none raised, none accepted
    assert [(r.notification, r.message_id, r.error) for r in results] == [
        (n, None, "SNS PublishBatch failed: RuntimeError: boom") for n in notifications
    ]


def make_store(world: World) -> OrderStore:
    return OrderStore(
        client=world.clients.dynamodb,
        processed_events_table=world.events_table,
        order_records_table=world.orders_table,
        record_ttl_seconds=60,
    )


def test_mark_sent_batch_marks_pending_and_reports_already_sent_in_one_call(world: World) -> None:
    # GIVEN three pending records, one already sent, one gone, and one pending with another content
    store = make_store(world)
    for i in range(3):
        seed(world, {"order_id": f"p-{i}"}, status="pending", event_id=f"p-{i}")
    seed(world, {"order_id": "s"}, status="sent", event_id="s")
    seed(world, {"order_id": "x", "v": 1}, status="pending", event_id="x")
    sha = world.event_records()
    notifications = [Notification(e, sha[e]["order_id"], sha[e]["payload_sha256"]) for e in ("p-0", "s", "p-1", "p-2")]
    notifications.append(Notification("gone", "gone", "e" * 64))  # no record (its TTL deleted it)
    notifications.append(Notification("x", "x", "f" * 64))  # not the recorded content
    world.board.calls.clear()
    # WHEN marked
    results = store.mark_sent_batch(notifications)
    # THEN the pending ones are marked, the sent and the gone one count as marked, the other content is not
    assert [r.notification for r in results] == notifications
    assert [r.error for r in results] == [None] * 5 + [STILL_PENDING_OTHER_CONTENT]
    states = world.event_records()
    assert [states[e]["status"] for e in ("p-0", "p-1", "p-2", "s", "x")] == ["sent"] * 4 + ["pending"]
    assert "gone" not in states  # a mark never creates a record
    assert all(states[e]["ttl"] == states[e]["sent_at"] + 60 for e in ("p-0", "p-1", "p-2"))
    assert "pending_shard" not in states["p-0"]
    # AND it took one BatchExecuteStatement (1 write unit per statement), no transaction
    assert world.board.calls == {"batch_execute_statement": 1}


def test_mark_sent_batch_raises_a_transient_error_when_the_first_call_fails(world: World) -> None:
    # GIVEN DynamoDB is unavailable, and 30 marks to make (two calls: 25 and 5)
    store = make_store(world)
    world.board.arm(ArmedFault(client_error("BatchExecuteStatement", "InternalServerError"), "batch_execute_statement"))
    # WHEN marking, THEN a StoreUnavailableError (a TransientError) says so, and no other call is tried
    with pytest.raises(StoreUnavailableError, match="InternalServerError"):
        store.mark_sent_batch([Notification(f"e-{i}", "o", "0" * 64) for i in range(30)])
    assert world.board.calls == {"batch_execute_statement": 1}


def test_a_failed_later_call_leaves_only_its_records_pending(world: World) -> None:
    # GIVEN 30 pending records (two calls: 25 and 5) and the second call fails
    store = make_store(world)
    for i in range(30):
        seed(world, {"order_id": f"p-{i}"}, status="pending", event_id=f"p-{i}")
    sha = world.event_records()
    notifications = [Notification(f"p-{i}", f"p-{i}", sha[f"p-{i}"]["payload_sha256"]) for i in range(30)]
    world.board.arm(
        ArmedFault(client_error("BatchExecuteStatement", "ThrottlingException"), "batch_execute_statement", at=2)
    )
    # WHEN marked
    results = store.mark_sent_batch(notifications)
    # THEN the first 25 are marked, the last 5 carry the call's error and stay pending
    assert [r.error is None for r in results] == [True] * 25 + [False] * 5
    assert all("ThrottlingException" in str(r.error) for r in results[25:])
    states = world.event_records()
    assert [states[f"p-{i}"]["status"] for i in range(30)] == ["sent"] * 25 + ["pending"] * 5


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("ThrottlingError", "StoreUnavailableError"),
        ("ProvisionedThroughputExceeded", "StoreUnavailableError"),
        ("InternalServerError", "StoreUnavailableError"),
        ("TransactionConflict", "StoreUnavailableError"),
        ("ValidationError", "RejectedByStoreError"),
    ],
)
def test_a_statement_that_fails_inside_the_call_leaves_only_its_record_pending(
    world: World, code: str, reason: str
) -> None:
    # GIVEN three pending records; DynamoDB answers the second statement with an error of its own
    store = make_store(world)
    for i in range(3):
        seed(world, {"order_id": f"p-{i}"}, status="pending", event_id=f"p-{i}")
    sha = world.event_records()
    notifications = [Notification(e, sha[e]["order_id"], sha[e]["payload_sha256"]) for e in ("p-0", "p-1", "p-2")]
    world.board.rewrites["batch_execute_statement"] = refuse_statements(
        lambda statement: statement_event_id(statement) == "p-1", code
    )
    # WHEN marked
    results = store.mark_sent_batch(notifications)
    # THEN the other two are marked (no mark depends on another); that one is still pending, and says why
    assert [r.error is None for r in results] == [True, False, True]
    assert str(results[1].error).startswith(reason)
    assert code in str(results[1].error)
    assert [world.event_records()[e]["status"] for e in ("p-0", "p-1", "p-2")] == ["sent", "pending", "sent"]
    # AND mark_sent of it alone answers False while the statement keeps failing, True once it applies
    assert store.mark_sent(notifications[1]) is False
    del world.board.rewrites["batch_execute_statement"]
    assert store.mark_sent(notifications[1]) is True
    assert world.event_records()["p-1"]["status"] == "sent"


def test_a_throttled_statement_in_a_batch_leaves_only_its_record_pending_and_reported(world: World) -> None:
    # GIVEN five new orders, and DynamoDB throttles the mark statement of evt-o-2 inside the call
    records = new_orders(5)
    world.board.rewrites["batch_execute_statement"] = refuse_statements(
        lambda statement: statement_event_id(statement) == "evt-o-2"
    )
    # WHEN the batch is processed
    response = world.invoke(records)
    # THEN only that record is reported and pending (notified: its redelivery notifies it again)
    assert world.failures(response) == {records[2]["messageId"]}
    states = world.event_records()
    assert {e for e, r in states.items() if r["status"] == "pending"} == {"evt-o-2"}
    assert set(world.notified_events()) == {f"evt-o-{i}" for i in range(5)}
    # AND the redelivery marks it
    del world.board.rewrites["batch_execute_statement"]
    assert world.invoke([records[2]]) == {"batchItemFailures": []}
    assert world.event_records()["evt-o-2"]["status"] == "sent"
