"""The HTTP stand-in answers botocore's calls in each service's wire format, a latency after arrival, unqueued."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from bench.capped import StandInServer

LATENCY_MS = 200.0


@pytest.fixture(scope="module")
def server() -> Iterator[StandInServer]:
    standin = StandInServer(LATENCY_MS, cpus=None)
    try:
        yield standin
    finally:
        standin.close()


def _client(service: str, server: StandInServer) -> Any:
    return boto3.client(
        service,
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(max_pool_connections=20, retries={"max_attempts": 1}),
    )


def test_first_delivery_calls_get_aws_shaped_successes(server: StandInServer) -> None:
    dynamodb, sns, sqs = (_client(s, server) for s in ("dynamodb", "sns", "sqs"))
    server.reset()
    # WHEN the calls of the first-delivery path are made
    dynamodb.transact_write_items(
        TransactItems=[{"Put": {"TableName": "t", "Item": {"event_id": {"S": "e"}}}}],
    )
    written = dynamodb.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": {"event_id": {"S": "e"}}}}]})
    dynamodb.update_item(
        TableName="t",
        Key={"event_id": {"S": "e"}},
        UpdateExpression="SET a = :a",
        ExpressionAttributeValues={":a": {"S": "b"}},
    )
    published = sns.publish(TopicArn="arn:aws:sns:us-east-1:123456789012:orders", Message="m")
    batch = sns.publish_batch(
        TopicArn="arn:aws:sns:us-east-1:123456789012:orders",
        PublishBatchRequestEntries=[{"Id": f"n{i}", "Message": f"m{i}"} for i in range(3)],
    )
    parked = sqs.send_message_batch(
        QueueUrl="https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
        Entries=[{"Id": "a", "MessageBody": "x"}, {"Id": "b", "MessageBody": "y"}],
    )
    # THEN botocore parses each answer as a success, batch entries by their ids
    assert written["UnprocessedItems"] == {}
    assert published["MessageId"]
    assert [entry["Id"] for entry in batch["Successful"]] == ["n0", "n1", "n2"]
    assert batch["Failed"] == []
    assert [entry["Id"] for entry in parked["Successful"]] == ["a", "b"]
    assert server.counts() == {
        "TransactWriteItems": 1,
        "BatchWriteItem": 1,
        "UpdateItem": 1,
        "Publish": 1,
        "PublishBatch": 1,
        "SendMessageBatch": 1,
    }


def test_an_unknown_operation_fails_and_is_counted(server: StandInServer) -> None:
    dynamodb = _client("dynamodb", server)
    server.reset()
    with pytest.raises(ClientError, match="UnknownOperationException"):
        dynamodb.scan(TableName="t")
    assert server.counts() == {"unknown:Scan": 1}


def test_concurrent_calls_wait_side_by_side_not_in_a_queue(server: StandInServer) -> None:
    sns = _client("sns", server)
    sns.publish(TopicArn="arn:aws:sns:us-east-1:123456789012:orders", Message="warm")

    def call(_: int) -> float:
        started = time.perf_counter()
        sns.publish(TopicArn="arn:aws:sns:us-east-1:123456789012:orders", Message="m")
        return time.perf_counter() - started

    # WHEN ten calls are made at once
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=10) as pool:
        each = list(pool.map(call, range(10)))
    total = time.perf_counter() - started
    # THEN each waited at least the latency, and all ten finished long before ten latencies in a row
    assert min(each) >= LATENCY_MS / 1000.0
    assert total < 5 * LATENCY_MS / 1000.0
