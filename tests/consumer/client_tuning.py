"""Quick local timing of botocore client settings (a script, not a test: timings are never asserted).

    .venv/bin/python -m tests.consumer.client_tuning [calls]

Runs the stand-in endpoint (:mod:`tests.consumer.standin`) in another process and measures, in
this process, the CPU time per call of the consumer's calls (a record's TransactWriteItems, a
PublishBatch of 10, the marks' TransactWriteItems of 10) for each variant of the client
configuration, interleaved round by round, median of the rounds. Also times client creation.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config

from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import CLIENT_CONFIG

SERVER = """
import sys, time
from tests.consumer.standin import running
with running() as standin:
    print(standin.url, flush=True)
    sys.stdin.readline()
"""

VARIANTS: dict[str, Config] = {
    "shipped": CLIENT_CONFIG,
    "validation off": CLIENT_CONFIG.merge(Config(parameter_validation=False)),
    "legacy retries": CLIENT_CONFIG.merge(Config(retries={"mode": "legacy", "total_max_attempts": 2})),
    "adaptive retries": CLIENT_CONFIG.merge(Config(retries={"mode": "adaptive", "total_max_attempts": 2})),
    "no tcp keepalive": CLIENT_CONFIG.merge(Config(tcp_keepalive=False)),
    "botocore defaults": Config(),
}


def calls(session: boto3.session.Session, url: str, config: Config) -> Callable[[int], None]:
    ddb = session.client("dynamodb", endpoint_url=url, config=config)
    sns = session.client("sns", endpoint_url=url, config=config)
    order = {"order_id": {"S": "o"}, "amount": {"N": "12.5"}, "items": {"L": [{"M": {"sku": {"S": "A"}}}]}}

    def one_batch(n: int) -> None:
        for i in range(10):
            ddb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "e", "Item": {"event_id": {"S": f"e-{n}-{i}"}, "status": {"S": "pending"}}}},
                    {"Put": {"TableName": "o", "Item": order, "ConditionExpression": "attribute_not_exists(order_id)"}},
                ]
            )
        entries: list[Any] = [{"Id": str(i), "Message": json.dumps({"event_id": f"e-{n}-{i}"})} for i in range(10)]
        sns.publish_batch(TopicArn="arn:aws:sns:eu-west-1:123456789012:orders", PublishBatchRequestEntries=entries)
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "e",
                        "Key": {"event_id": {"S": f"e-{n}-{i}"}},
                        "UpdateExpression": "SET #s = :s",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": {":s": {"S": "sent"}},
                    }
                }
                for i in range(10)
            ]
        )

    return one_batch


def main(rounds: int = 15, batches: int = 20) -> None:
    server = subprocess.Popen(  # noqa: S603 - this interpreter, this repository's stand-in
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    assert server.stdin is not None
    url = server.stdout.readline().strip()
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="eu-west-1")
    try:
        runners = {name: calls(session, url, config) for name, config in VARIANTS.items()}
        for runner in runners.values():
            runner(0)  # warm: connections, endpoint rules, caches
        samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for round_number in range(rounds):
            names = list(VARIANTS)
            names = names[round_number % len(names) :] + names[: round_number % len(names)]
            for name in names:
                started = time.process_time()
                for n in range(batches):
                    runners[name](n)
                samples[name].append((time.process_time() - started) / (batches * 12) * 1000)
        print(f"CPU ms per call (median of {rounds} rounds x {batches} batches of 12 calls):")
        for name, values in samples.items():
            print(f"  {name:<18} {statistics.median(values):.3f}  (p10 {sorted(values)[len(values) // 10]:.3f})")
        # Ten threads at once: the pool size matters for reuse (a pool too small opens new connections).
        for pool in (10, 12):
            config = CLIENT_CONFIG.merge(Config(max_pool_connections=pool))
            runner = calls(session, url, config)
            runner(0)
            with ThreadPoolExecutor(12) as threads:
                started = time.process_time()
                list(threads.map(runner, range(60)))
                cpu = (time.process_time() - started) / (60 * 12) * 1000
            print(f"  12 threads, pool {pool:<3}  {cpu:.3f}")
        created = []
        for _ in range(10):
            started = time.perf_counter()
            session.client("dynamodb", endpoint_url=url, config=CLIENT_CONFIG)
            created.append((time.perf_counter() - started) * 1000)
        print(f"client creation: median {statistics.median(created):.1f} ms (warm session)")
    finally:
        server.stdin.write("\n")
        server.stdin.flush()
        server.wait(timeout=10)


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:]))
