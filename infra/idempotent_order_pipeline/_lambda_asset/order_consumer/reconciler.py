"""Lambda entry point of the reconciler: ``order_consumer.reconciler.handler``. Thin: the flow is in
:mod:`order_consumer.reconciliation`.

Run on a schedule (any event is accepted and ignored). Reads the consumer's environment variables
(``PROCESSED_EVENTS_TABLE``, ``ORDER_RECORDS_TABLE``, ``TOPIC_ARN``, ``DEAD_LETTER_QUEUE_URL``,
``RECORD_TTL_SECONDS``, ...) plus ``RECONCILE_AFTER_SECONDS``: records pending for longer than this
many seconds are notified (any non-negative number; the construct's ``reconcile_after`` prop is
where the value is validated against the queue's redelivery). Returns before the invocation's
deadline whatever a call does, and emits ``PendingReconciled`` on every run and
``OldestPendingAgeSeconds`` whenever the age is known (every shard of the index read), zeros
included; an unknown age is withheld, so the ``pending_too_old`` alarm (missing data breaching)
fires. A run ended by an unforeseen error fails the invocation after its metrics.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from .config import Settings
from .contract.errors import ConfigurationError, ReconciliationFailedError
from .contract.metric_names import OLDEST_PENDING_AGE_SECONDS, PENDING_RECONCILED
from .contract.names import RECONCILE_AFTER_VARIABLE
from .contract.pending_index import ORDER_ROW_ATTRIBUTES
from .notifier import Notifier
from .observability import logger, metrics
from .pending_records import PendingIndex
from .reconciliation import Reconciler
from .store import OrderStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sns.client import SNSClient

# Every call bounded well inside the run's stop margin (reconciliation.DEFAULT_MIN_REMAINING_MS).
CLIENT_CONFIG = Config(
    # total_max_attempts counts the first attempt (botocore's max_attempts would add one more).
    retries={"mode": "standard", "total_max_attempts": 2},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=4,
)


@dataclass(frozen=True)
class ReconcilerClients:
    """The two AWS clients the reconciler calls."""

    dynamodb: DynamoDBClient
    sns: SNSClient

    @classmethod
    def from_default_session(cls) -> ReconcilerClients:
        """Clients from boto3's default session (so ``moto.mock_aws()`` started earlier reaches them)."""
        return cls(
            dynamodb=boto3.client("dynamodb", config=CLIENT_CONFIG), sns=boto3.client("sns", config=CLIENT_CONFIG)
        )


def reconcile_after_seconds(environ: Mapping[str, str]) -> float:
    """``RECONCILE_AFTER_SECONDS``: a non-negative number of seconds (0 reconciles every pending record)."""
    raw = environ.get(RECONCILE_AFTER_VARIABLE, "")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise ConfigurationError(f"{RECONCILE_AFTER_VARIABLE}={raw!r}: expected a non-negative number of seconds")
    return value


def build_reconciler(environ: Mapping[str, str], clients: ReconcilerClients) -> Reconciler:
    """The reconciler for this environment, with the consumer's own store and notifier."""
    settings = Settings.from_env(environ)
    return Reconciler(
        index=PendingIndex(
            client=clients.dynamodb,
            processed_events_table=settings.processed_events_table,
            order_records_table=settings.order_records_table,
            order_row_attributes=settings.notification_format.row_attributes(ORDER_ROW_ATTRIBUTES),
        ),
        notifier=Notifier(client=clients.sns, topic_arn=settings.topic_arn),
        store=OrderStore(
            client=clients.dynamodb,
            processed_events_table=settings.processed_events_table,
            order_records_table=settings.order_records_table,
            record_ttl_seconds=settings.record_ttl_seconds,
        ),
        reconcile_after_seconds=reconcile_after_seconds(environ),
        notification_format=settings.notification_format,
    )


@dataclass(frozen=True)
class _Injected:
    clients: ReconcilerClients | None = None
    environ: Mapping[str, str] | None = None


# A run every few minutes: the reconciler is built at each run (clients ~0.1 s of CPU), so the
# environment is read fresh and nothing from an earlier run is reused.
_injected = _Injected()
_lock = threading.Lock()


def configure(clients: ReconcilerClients | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Use these clients and this environment for the next runs (tests).

    With no arguments the default applies again: clients from boto3's default session and settings
    from ``os.environ``, both made at each run.
    """
    global _injected
    with _lock:
        _injected = _Injected(clients=clients, environ=environ)


def _current_reconciler() -> Reconciler:
    with _lock:
        injected = _injected
    environ = os.environ if injected.environ is None else injected.environ
    return build_reconciler(environ, injected.clients or ReconcilerClients.from_default_session())


@metrics.log_metrics(raise_on_empty_metrics=False)
@logger.inject_lambda_context(clear_state=True)
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, object]:
    """One reconciliation run; returns its report, or fails once its metrics are out if the run failed."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    report = _current_reconciler().run(remaining)
    metrics.add_metric(name=PENDING_RECONCILED, unit=MetricUnit.Count, value=report.reconciled)
    if report.oldest_pending_age_known:
        metrics.add_metric(
            name=OLDEST_PENDING_AGE_SECONDS, unit=MetricUnit.Seconds, value=report.oldest_pending_age_seconds
        )
    if report.failed:
        # Counted in the function's Errors (the reconciler_errors alarm); the metrics above still go out.
        raise ReconciliationFailedError(f"the reconciliation run failed: {report.errors[-1:]}")
    return report.as_dict()
