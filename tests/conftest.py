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
