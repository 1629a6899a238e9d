"""Settings every test process needs before any product module is imported."""

from __future__ import annotations

import os

# No test may reach a real AWS account: dummy credentials and a fixed region for boto3 and moto.
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "eu-west-1",
    # Powertools reads these when order_consumer.observability is first imported.
    "POWERTOOLS_SERVICE_NAME": "order-consumer",
    "POWERTOOLS_METRICS_NAMESPACE": "IdempotentOrderPipelineTests",
}.items():
    os.environ[_name] = _value
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    """One import root: the Lambda asset is loaded only as ``idempotent_order_pipeline._lambda_asset``.

    A module loaded under two names gives two classes of the same error, and ``isinstance`` lies; so a
    test process that imported ``order_consumer`` (or the former ``order_events``) as a top-level
    package fails the run. Processes that emulate Lambda load it top-level in their own process.
    """
    import sys

    stray = sorted(name for name in sys.modules if name.split(".")[0] in ("order_consumer", "order_events"))
    if stray:
        print(f"\nthe Lambda asset was imported under a second root in the test process: {stray[:5]}")
        session.exitstatus = 1  # type: ignore[attr-defined]
