"""Lambda entry point: ``order_consumer.handler.handler``. Thin: the flow lives in the pipeline.

Takes an SQS event and returns ``{"batchItemFailures": [{"itemIdentifier": messageId}, ...]}``
(the event source mapping must have ``ReportBatchItemFailures``). The DynamoDB and SNS clients are
made at import (:mod:`order_consumer.runtime`); the settings and the pipeline at the first
invocation, once per container; tests can inject clients with :func:`configure`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from .config import Settings
from .observability import logger, metrics
from .pipeline import OrderPipeline, outcome_counts
from .runtime import Clients, build_pipeline, default_clients
from .snapstart import on_restore, register

_pipeline: OrderPipeline | None = None
_lock = threading.Lock()


def configure(clients: Clients | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Drop the cached pipeline; the next invocation builds it with these clients and environment.

    With no arguments the default applies again: the clients made at import (a new botocore session), settings
    from ``os.environ``.
    """
    global _pipeline
    with _lock:
        if _pipeline is not None:
            _pipeline.close()
        _pipeline = None if clients is None else build_pipeline(Settings.from_env(environ), clients)


@on_restore
def _drop_pipeline_after_restore() -> None:
    """SnapStart: a pipeline holds the clients it was built with; the next invocation builds a new one."""
    global _pipeline
    with _lock:
        if _pipeline is not None:
            _pipeline.close()
        _pipeline = None


def _get_pipeline() -> OrderPipeline:
    global _pipeline
    with _lock:
        if _pipeline is None:
            _pipeline = build_pipeline(Settings.from_env(), default_clients())
        return _pipeline


@metrics.log_metrics(raise_on_empty_metrics=False)
@logger.inject_lambda_context(clear_state=True)
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, list[dict[str, str]]]:
    """Process an SQS batch; report the records SQS must redeliver."""
    pipeline = _get_pipeline()
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    results = pipeline.process_batch(event.get("Records") or [], remaining)
    for name, count in outcome_counts(results, schema=pipeline.validates_schema).items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    return {"batchItemFailures": [{"itemIdentifier": result.message_id} for result in results if result.failed]}


register()
