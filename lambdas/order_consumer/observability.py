"""Powertools Logger and Metrics, shared by the handler and the pipeline.

The service name and metrics namespace come from ``POWERTOOLS_SERVICE_NAME`` and
``POWERTOOLS_METRICS_NAMESPACE``, which the construct sets.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()

# Outcome metrics (unit Count), emitted on every invocation, zeros included, so alarms see data.
ORDERS_RECORDED = "OrdersRecorded"
DUPLICATES_SKIPPED = "DuplicatesSkipped"
NOTIFICATIONS_PUBLISHED = "NotificationsPublished"
NOTIFICATIONS_REPUBLISHED = "NotificationsRepublished"
CONFLICTS = "Conflicts"
INVALID_MESSAGES = "InvalidMessages"
TRANSIENT_FAILURES = "TransientFailures"
OUTCOME_METRICS = (
    ORDERS_RECORDED,
    DUPLICATES_SKIPPED,
    NOTIFICATIONS_PUBLISHED,
    NOTIFICATIONS_REPUBLISHED,
    CONFLICTS,
    INVALID_MESSAGES,
    TRANSIENT_FAILURES,
)
