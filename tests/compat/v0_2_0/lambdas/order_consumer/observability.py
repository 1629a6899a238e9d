"""Powertools Logger and Metrics, shared by the handler and the pipeline.

The service name and metrics namespace come from ``POWERTOOLS_SERVICE_NAME`` and
``POWERTOOLS_METRICS_NAMESPACE``, which the construct sets. The metric names are in
:mod:`order_events.metric_names`.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()
