"""The environment the construct gives the function: the one home of the variable names.

``IdempotentSubscriber`` (``idempotent_order_pipeline.subscriber``) sets these variables from its
props; :meth:`Deduplicator.from_environment` reads them. Names are a contract between the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: The deduplication table's name.
DEDUP_TABLE_VARIABLE = "ORDER_SUBSCRIBER_DEDUP_TABLE"
#: How long a claim holds an event, in seconds (the construct sets it to the lease prop).
LEASE_SECONDS_VARIABLE = "ORDER_SUBSCRIBER_LEASE_SECONDS"
#: How long a deduplication record lives after its last write, in seconds (its ``ttl``).
RECORD_TTL_SECONDS_VARIABLE = "ORDER_SUBSCRIBER_RECORD_TTL_SECONDS"
#: Every variable the construct owns (the team's ``environment`` may not set them).
VARIABLES = (DEDUP_TABLE_VARIABLE, LEASE_SECONDS_VARIABLE, RECORD_TTL_SECONDS_VARIABLE)


@dataclass(frozen=True)
class Settings:
    """The deduplication table and the times the protocol uses."""

    table: str
    lease_seconds: float
    record_ttl_seconds: int

    @classmethod
    def from_environment(cls, environment: Mapping[str, str]) -> Settings:
        """The settings the construct put in the function's environment."""
        return cls(
            table=environment[DEDUP_TABLE_VARIABLE],
            lease_seconds=float(environment[LEASE_SECONDS_VARIABLE]),
            record_ttl_seconds=int(environment[RECORD_TTL_SECONDS_VARIABLE]),
        )
