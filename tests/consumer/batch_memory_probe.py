"""Run in a fresh process: how much peak RSS one batch of ~6 MB of hostile bodies adds to the pipeline.

``python tests/consumer/batch_memory_probe.py NAME COUNT`` builds COUNT records of the body NAME
of ``memory_probe.BODIES`` (256 KiB each, distinct order ids), warms the pipeline up on one small
record, then processes the batch: the real parsing and the real DynamoDB request serialization
(answered by a stand-in transport, so no server memory is counted), notifications accepted by a
stand-in notifier. Prints one JSON line: the payload size, the outcomes and the peak RSS increase.
"""

from __future__ import annotations

import json
import resource
import sys
from collections import Counter
from collections.abc import Sequence

import boto3

from idempotent_order_pipeline._lambda_asset.order_consumer.dead_letter import DeadLetterQueue
from idempotent_order_pipeline._lambda_asset.order_consumer.notifier import Notification, Notifier, PublishResult
from idempotent_order_pipeline._lambda_asset.order_consumer.pipeline import OrderPipeline
from idempotent_order_pipeline._lambda_asset.order_consumer.store import OrderStore
from tests.consumer.memory_probe import BODIES, _transport


class _AcceptingNotifier(Notifier):
    def publish_batch(self, notifications: Sequence[Notification]) -> list[PublishResult]:
        return [PublishResult(n, f"id-{n.event_id}", None) for n in notifications]


def _record(index: int, body: str) -> dict[str, object]:
    return {
        "messageId": f"m-{index}",
        "receiptHandle": "h",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:orders",
    }


def main(name: str, count: int) -> None:
    dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
    _transport(dynamodb)
    pipeline = OrderPipeline(
        store=OrderStore(client=dynamodb, processed_events_table="e", order_records_table="o", record_ttl_seconds=60),
        notifier=_AcceptingNotifier(client=boto3.client("sns", region_name="eu-west-1"), topic_arn="arn:t"),
        dead_letters=DeadLetterQueue(queue_url="https://sqs/dlq", client=boto3.client("sqs", region_name="eu-west-1")),
    )
    pipeline.process_batch([_record(0, '{"order_id": "warm-up", "x": [{}, [], 1]}')])
    body = BODIES[name]()
    records = [_record(i, body.replace('"order_id": "m"', f'"order_id": "m{i:04d}"', 1)) for i in range(count)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results = pipeline.process_batch(records)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    line = {
        "payload": sum(len(str(r["body"]).encode()) for r in records),
        "outcomes": dict(Counter(result.outcome.value for result in results)),
        "increase": (after - before) * 1024,
    }
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
