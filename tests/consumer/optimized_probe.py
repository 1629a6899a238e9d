"""Run in a fresh process, as ``python [-O | -OO] tests/consumer/optimized_probe.py``: the functions' work, as JSON.

``PYTHONOPTIMIZE`` in a function's environment (1 or 2) runs the Lambda runtime's Python as ``-O``
(``assert`` statements removed) or ``-OO`` (docstrings removed too). This probe imports the
consumer's handler, the reconciler's entry point and the subscriber helper, then on moto runs a
consumer batch (new, duplicate and poison orders), a reconciler pass over a record the consumer left
pending, and a subscriber batch, and prints one JSON object of what they did. A DeprecationWarning
raised by the functions' own code is an error here (a call that a later Python removes).
``tests/consumer/test_optimized_python.py`` compares the objects of the three flags.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from typing import Any

#: The functions' own modules: a DeprecationWarning attributed to one of them is an error.
OWN_MODULES = r"(idempotent_order_pipeline\._lambda_asset|idempotent_order_pipeline\._subscriber_layer)(\.|$)"


def _consumer() -> dict[str, Any]:
    from tests.consumer.harness import World, sqs_record

    world = World()
    records = [
        sqs_record({"order_id": "o-1", "amount": 12.5}),
        sqs_record({"order_id": "o-1", "amount": 12.5}),
        sqs_record('{"order_id": "o-nan", "n": NaN}'),
        sqs_record('{"order_id": "o-big", "n": ' + "7" * 5000 + "}"),
        sqs_record('{"order_id": "o-twice", "a": 1, "a": 2}'),
    ]
    response = world.invoke(records)
    return {
        "failures": len(response["batchItemFailures"]),
        "orders": sorted(world.order_rows()),
        "statuses": sorted(record["status"] for record in world.event_records().values()),
        "parked": sorted(m["MessageAttributes"]["error_code"]["StringValue"] for m in world.dead_letters()),
        "notified": len(world.new_notifications()),
    }


def _reconciler() -> dict[str, Any]:
    from tests.reconciler.harness import ReconcilerWorld, order

    world = ReconcilerWorld(prefix="r-")
    world.crash_consumer_before_publish([order(1), order(2)])
    later = time.time() + 1
    report = world.reconciler(reconcile_after_seconds=0, clock=lambda: later).run().as_dict()
    return {key: report[key] for key in ("found", "reconciled", "left_pending", "failed")} | {
        "notified": sorted(world.notified())
    }


def _subscriber(dynamodb: Any) -> dict[str, Any]:
    from tests.subscriber.harness import SubscriberWorld, copies

    world = SubscriberWorld(dynamodb, prefix="s-")
    response = world.counting()({"Records": [*copies(2), {"messageId": "junk", "body": "[", "messageAttributes": {}}]})
    return {"failures": response["batchItemFailures"], "counters": dict(world.counters())}


def main() -> None:
    from tests.environment import TEST_ENVIRONMENT  # the repository root is on PYTHONPATH

    os.environ.update(TEST_ENVIRONMENT)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    warnings.filterwarnings("error", category=DeprecationWarning, module=OWN_MODULES)
    import boto3
    from moto import mock_aws

    from idempotent_order_pipeline.sandbox import moto_patches

    moto_patches.apply_partiql_fix()  # as tests/conftest.py runs every moto-backed test
    from idempotent_order_pipeline._lambda_asset.order_consumer import handler, reconciler
    from idempotent_order_pipeline._subscriber_layer.python import idempotent_subscriber

    with mock_aws():
        result = {
            "optimize": sys.flags.optimize,
            "docstrings": handler.__doc__ is not None and reconciler.__doc__ is not None,
            "subscriber_docstrings": idempotent_subscriber.__doc__ is not None,
            "consumer": _consumer(),
            "reconciler": _reconciler(),
            "subscriber": _subscriber(boto3.client("dynamodb")),
        }
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
