"""The store's translation of DynamoDB errors: which domain error, and a message naming what failed.

The pipeline branches on the class (a permanent error parks the message, a transient one retries
it); operators read the message in the log line and the DLQ's ``error_message``. Each DynamoDB
answer is injected at the client, as botocore raises it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import (
    ItemTooLargeError,
    RejectedByStoreError,
    StoreUnavailableError,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import DEFAULT_IDENTITY_FIELDS
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_order_message
from idempotent_order_pipeline._lambda_asset.order_consumer.store import OrderStore
from tests.consumer.harness import cancelled

ADOPT_ACTION = "the pending check of the order row's event"


class RaisingClient:
    """A DynamoDB client whose UpdateItem answers with one error response (``Error`` may be absent)."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response

    def update_item(self, **_: Any) -> None:
        raise ClientError(self.response, "UpdateItem")  # type: ignore[arg-type]


def store_answering(response: dict[str, Any]) -> OrderStore:
    return OrderStore(
        client=RaisingClient(response),  # type: ignore[arg-type]
        processed_events_table="events",
        order_records_table="orders",
        record_ttl_seconds=60,
    )


@pytest.mark.parametrize(
    ("error", "expected", "message"),
    [
        pytest.param(
            {"Code": "ValidationException", "Message": "Item size has exceeded the maximum allowed size"},
            ItemTooLargeError,
            f"DynamoDB rejected {ADOPT_ACTION}: Item size has exceeded the maximum allowed size",
            id="too-large",
        ),
        pytest.param(
            {"Code": "SerializationException", "Message": "bad number"},
            RejectedByStoreError,
            f"DynamoDB rejected {ADOPT_ACTION}: SerializationException: bad number",
            id="rejected",
        ),
        pytest.param(
            {"Code": "ThrottlingException", "Message": "slow down"},
            StoreUnavailableError,
            f"DynamoDB failed {ADOPT_ACTION}: ThrottlingException: slow down",
            id="throttled",
        ),
        pytest.param(
            {"Code": "InternalServerError"},
            StoreUnavailableError,
            f"DynamoDB failed {ADOPT_ACTION}: InternalServerError: ",
            id="no-message",
        ),
    ],
)
def test_a_failed_update_becomes_the_domain_error_of_its_code_naming_the_action_code_and_message(
    error: dict[str, str], expected: type[Exception], message: str
) -> None:
    # GIVEN DynamoDB answers the pending check with this error
    store = store_answering({"Error": error})
    # WHEN a delivery checks whether another key's record is still pending
    with pytest.raises(expected) as raised:
        store.adopt_pending("evt-1", "sha")
    # THEN the error is the domain error of the code, and its message names the action, the code
    # and DynamoDB's message exactly
    assert type(raised.value) is expected
    assert str(raised.value) == message
    assert isinstance(raised.value.__cause__, ClientError)


def test_an_error_response_without_its_error_member_is_a_store_failure_not_a_crash() -> None:
    # GIVEN a ClientError whose response has no Error member (a proxy or a stub answering oddly)
    store = store_answering({"ResponseMetadata": {"HTTPStatusCode": 500}})
    # WHEN the pending check fails with it
    with pytest.raises(StoreUnavailableError) as raised:
        store.adopt_pending("evt-1", "sha")
    # THEN it is a transient store failure (the message is retried), with empty code and message
    assert str(raised.value) == f"DynamoDB failed {ADOPT_ACTION}: : "


def test_a_pending_check_whose_condition_fails_answers_false() -> None:
    # GIVEN the record is sent, gone or of another content (the condition fails)
    store = store_answering({"Error": {"Code": "ConditionalCheckFailedException", "Message": "failed"}})
    # WHEN a delivery checks it
    adopted = store.adopt_pending("evt-1", "sha")
    # THEN nothing is left to notify for it, and no error is raised
    assert adopted is False


class UnreachableClient:
    """A DynamoDB client that cannot reach its endpoint."""

    def update_item(self, **_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com")


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda store: store.adopt_pending("evt-1", "sha"), id="pending-check"),
        pytest.param(lambda store: store.expire_sent("evt-1"), id="expiry-of-a-sent-record"),
    ],
)
def test_an_unreachable_store_is_a_store_failure_naming_the_endpoint(call: Callable[[OrderStore], object]) -> None:
    # GIVEN DynamoDB cannot be reached
    store = OrderStore(
        client=UnreachableClient(),  # type: ignore[arg-type]
        processed_events_table="events",
        order_records_table="orders",
        record_ttl_seconds=60,
    )
    # WHEN the pending check, or the reconciler's release of a sent record, is made
    with pytest.raises(StoreUnavailableError) as raised:
        call(store)
    # THEN it is a transient store failure whose message says why
    assert str(raised.value) == (
        'DynamoDB unreachable: Could not connect to the endpoint URL: "https://dynamodb.eu-west-1.amazonaws.com"'
    )


class CancellingClient:
    """A DynamoDB client whose TransactWriteItems is cancelled with the given per-item reason codes."""

    def __init__(self, *codes: str) -> None:
        self.codes = codes

    def transact_write_items(self, **_: Any) -> None:
        raise cancelled(*self.codes)


@pytest.mark.parametrize(
    ("codes", "expected", "message"),
    [
        pytest.param(
            ("ValidationError", "None"),
            RejectedByStoreError,
            "DynamoDB rejected the order transaction: [{'Code': 'ValidationError'}, {'Code': 'None'}]",
            id="invalid",
        ),
        pytest.param(
            ("TransactionConflict", "None"),
            StoreUnavailableError,
            "order transaction cancelled: ['TransactionConflict', 'None']",
            id="conflict",
        ),
        pytest.param(
            ("ConditionalCheckFailed", "None"),
            StoreUnavailableError,
            "existing event record without ALL_OLD status: None",
            id="event-exists-without-its-item",
        ),
    ],
)
def test_a_cancelled_record_write_becomes_the_domain_error_of_its_reasons(
    codes: tuple[str, str], expected: type[Exception], message: str
) -> None:
    # GIVEN DynamoDB cancels the order's transaction with these per-item reasons
    store = OrderStore(
        client=CancellingClient(*codes),  # type: ignore[arg-type]
        processed_events_table="events",
        order_records_table="orders",
        record_ttl_seconds=60,
    )
    order = parse_order_message(json.dumps({"order_id": "o-1"}), {}, DEFAULT_IDENTITY_FIELDS)
    # WHEN the order is recorded
    with pytest.raises(expected) as raised:
        store.record(order)
    # THEN an invalid item is a permanent rejection (parked), a conflict a transient failure (retried),
    # each naming the reasons; an existing event whose item did not come back is a transient failure
    # too (never taken for a duplicate)
    assert type(raised.value) is expected
    assert str(raised.value) == message
