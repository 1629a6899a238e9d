"""The environment every test process runs with: dummy credentials, a fixed region, Powertools' names.

No test may reach a real AWS account. ``tests/conftest.py`` sets it for the test session; a probe the
tests start in a fresh interpreter (``tests/consumer/optimized_probe.py``) sets the same.
"""

from __future__ import annotations

TEST_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "eu-west-1",
    # Powertools reads these when order_consumer.observability is first imported.
    "POWERTOOLS_SERVICE_NAME": "order-consumer",
    "POWERTOOLS_METRICS_NAMESPACE": "IdempotentOrderPipelineTests",
}
