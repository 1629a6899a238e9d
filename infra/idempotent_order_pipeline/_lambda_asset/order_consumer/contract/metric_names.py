"""Names of the consumer's outcome metrics (EMF, unit Count, dimension ``service``).

Shared by the handler, which emits every one on every invocation (zeros included, so alarms see
data), and the construct, which builds its alarms, dashboard and ``metric_*`` methods on them.
"""

from __future__ import annotations

ORDERS_RECORDED = "OrdersRecorded"
DUPLICATES_SKIPPED = "DuplicatesSkipped"
NOTIFICATIONS_PUBLISHED = "NotificationsPublished"
NOTIFICATIONS_REPUBLISHED = "NotificationsRepublished"
CONFLICTS = "Conflicts"
INVALID_MESSAGES = "InvalidMessages"
#: Orders that break the pipeline's ``order_schema`` (parked with ``SCHEMA_VIOLATION``): emitted, and alarmed on,
#: only by a pipeline with one, so it is not in :data:`OUTCOME_METRICS`.
SCHEMA_VIOLATIONS = "SchemaViolations"
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

# The reconciler's metrics (same namespace and ``service`` dimension), emitted on every run.
#: Pending records the reconciler published and marked sent (unit Count).
PENDING_RECONCILED = "PendingReconciled"
#: Age of the oldest record pending for longer than the threshold when the run ended, 0 if none (unit Seconds).
OLDEST_PENDING_AGE_SECONDS = "OldestPendingAgeSeconds"
RECONCILER_METRICS = (PENDING_RECONCILED, OLDEST_PENDING_AGE_SECONDS)

#: The event source mapping's EventCount metrics for an SQS source (namespace AWS/Lambda, dimension
#: EventSourceMappingUUID), published with the construct's ``event_source_metrics`` (billed as custom metrics).
EVENT_SOURCE_METRICS = (
    "PolledEventCount",
    "FilteredOutEventCount",
    "InvokedEventCount",
    "FailedInvokeEventCount",
    "DeletedEventCount",
)
