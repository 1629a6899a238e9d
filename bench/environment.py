"""The product consumer's environment as the bench gives it: the construct's variables, by their contract names.

One place for what ``ours`` runs with (in-process, in the capped workers and in the capacity model), so
a variable renamed in ``order_consumer.contract.names`` moves the bench too.
"""

from __future__ import annotations

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import DEFAULT_IDENTITY_FIELDS

#: The product's environment variables the bench sets (and restores).
OURS_VARIABLES = (
    names.PROCESSED_EVENTS_TABLE_VARIABLE,
    names.ORDER_RECORDS_TABLE_VARIABLE,
    names.TOPIC_ARN_VARIABLE,
    names.DEAD_LETTER_QUEUE_URL_VARIABLE,
    names.RECORD_TTL_SECONDS_VARIABLE,
    names.IDENTITY_FIELDS_VARIABLE,
)


def ours(*, processed_events: str, order_records: str, topic_arn: str, dead_letter_queue_url: str) -> dict[str, str]:
    """The consumer's variables for these resources, with the construct's defaults for the rest."""
    return {
        names.PROCESSED_EVENTS_TABLE_VARIABLE: processed_events,
        names.ORDER_RECORDS_TABLE_VARIABLE: order_records,
        names.TOPIC_ARN_VARIABLE: topic_arn,
        names.DEAD_LETTER_QUEUE_URL_VARIABLE: dead_letter_queue_url,
        names.RECORD_TTL_SECONDS_VARIABLE: str(names.DEFAULT_RECORD_TTL_SECONDS),
        names.IDENTITY_FIELDS_VARIABLE: ",".join(DEFAULT_IDENTITY_FIELDS),
    }
