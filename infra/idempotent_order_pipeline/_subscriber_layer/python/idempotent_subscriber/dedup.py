"""Once per ``event_id``: a claim with a lease, then a ``done`` mark, in a deduplication table.

The table (partition key ``event_id``) holds one record per event::

    status = in_progress, claim_token, lease_expires_at, ttl    a copy is acting on the event
    status = done, done_at, ttl                                   the effect happened

=========  ===================================  ===============================  ==========================
step       call                                 condition                        when the condition fails
=========  ===================================  ===============================  ==========================
claim      ``PutItem`` in_progress, a new       :data:`FREE_TO_CLAIM`: no        ``done``: a duplicate,
           token, ``lease_expires_at``          record, or a claim whose lease   acknowledge it; a live
                                                ran out (never a done one)       claim: redeliver later
complete   ``TransactWriteItems``: the          :data:`STILL_OURS` on the mark   :class:`ClaimLost`: our
           ``done`` mark *and* the effect's     (the effect's writes may add     lease ran out and another
           own writes                           their own conditions)            copy took it; nothing
                                                                                 was written
release    ``DeleteItem`` (after a failure)     :data:`STILL_OURS`               someone else holds it or
                                                                                 it is done: leave it
=========  ===================================  ===============================  ==========================

A crash anywhere needs nothing: the claim's lease runs out and the redelivery (after the queue's
visibility timeout, longer than the lease) claims the event again. The claim's ``token`` is the
idempotency key of an external call: one token per lease, so a provider that deduplicates on it
receives the call at most once per lease.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from .config import Settings
from .errors import ClaimLost, DedupUnavailable, EffectRefused, TooManyWrites

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

STATUS_IN_PROGRESS = "in_progress"
STATUS_DONE = "done"
#: DynamoDB's limit of items in one TransactWriteItems; the done mark takes one.
MAX_TRANSACTION_ITEMS = 100
MAX_EFFECT_WRITES = MAX_TRANSACTION_ITEMS - 1

# --- Conditions ------------------------------------------------------------------------------------
# First copy of this event, or a copy that crashed halfway and whose lease has run out. A done record
# never matches: the effect happened.
FREE_TO_CLAIM = "attribute_not_exists(event_id) OR (#status = :in_progress AND lease_expires_at < :now)"
# The claim is still this copy's: nobody took over after its lease ran out, and it is not done.
STILL_OURS = "#status = :in_progress AND claim_token = :token"

_STATUS_NAME = {"#status": "status"}


@dataclass(frozen=True)
class Claim:
    """This copy's right to act on ``event_id`` until ``lease_expires_at`` (epoch seconds)."""

    event_id: str
    #: Unique per claim: the idempotency key of an external call made under this lease.
    token: str
    lease_expires_at: float


@dataclass(frozen=True)
class Done:
    """The effect already happened: this copy is a duplicate, acknowledge it."""


@dataclass(frozen=True)
class Busy:
    """Another copy holds a live claim: let SQS redeliver this one later."""


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class Deduplicator:
    """Claims, completes and releases events in the deduplication table. Thread-safe."""

    def __init__(
        self,
        *,
        table: str,
        lease_seconds: float,
        record_ttl_seconds: int,
        client: DynamoDBClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if client is None:
            import boto3  # the Lambda runtime's; imported here so tests never create a real client

            client = boto3.client("dynamodb")
        self._client = client
        self._table = table
        self._lease = lease_seconds
        self._ttl = record_ttl_seconds
        self._clock = clock

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] | None = None) -> Deduplicator:
        """The deduplicator the construct configured (its variables, see ``config``)."""
        settings = Settings.from_environment(os.environ if environment is None else environment)
        return cls(
            table=settings.table, lease_seconds=settings.lease_seconds, record_ttl_seconds=settings.record_ttl_seconds
        )

    def claim(self, event_id: str) -> Claim | Done | Busy:
        """Take the event for this copy, or say why not.

        Raises:
            DedupUnavailable: DynamoDB did not answer.
        """
        now = self._clock()
        claim = Claim(event_id=event_id, token=uuid.uuid4().hex, lease_expires_at=now + self._lease)
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    "event_id": {"S": event_id},
                    "status": {"S": STATUS_IN_PROGRESS},
                    "claim_token": {"S": claim.token},
                    "lease_expires_at": {"N": f"{claim.lease_expires_at:.3f}"},
                    "ttl": {"N": str(int(now) + self._ttl)},
                },
                ConditionExpression=FREE_TO_CLAIM,
                ExpressionAttributeNames=_STATUS_NAME,
                ExpressionAttributeValues={":in_progress": {"S": STATUS_IN_PROGRESS}, ":now": {"N": f"{now:.3f}"}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise DedupUnavailable(f"claim of {event_id}: {_code(exc)}") from exc
            existing: Any = exc.response.get("Item") or {}
            return Done() if existing.get("status", {}).get("S") == STATUS_DONE else Busy()
        except BotoCoreError as exc:
            raise DedupUnavailable(f"claim of {event_id}: {exc!r}") from exc
        return claim

    def complete(self, claim: Claim, effect_writes: Sequence[Mapping[str, Any]] = ()) -> None:
        """Mark the event done in one transaction with the effect's own writes (TransactWriteItems entries).

        Raises:
            ClaimLost: the claim was taken over; nothing was written, the other copy acts.
            EffectRefused: a condition of the effect's writes failed; nothing was written.
            TooManyWrites: more than :data:`MAX_EFFECT_WRITES` writes; nothing was sent.
            DedupUnavailable: DynamoDB did not answer; the transaction may or may not have been applied.
        """
        if len(effect_writes) > MAX_EFFECT_WRITES:
            raise TooManyWrites(
                f"{len(effect_writes)} writes for {claim.event_id}: one transaction holds the done mark and at most "
                f"{MAX_EFFECT_WRITES} of the effect's"
            )
        now = self._clock()
        mark = {
            "Update": {
                "TableName": self._table,
                "Key": {"event_id": {"S": claim.event_id}},
                "UpdateExpression": "SET #status = :done, done_at = :now, #ttl = :ttl "
                "REMOVE claim_token, lease_expires_at",
                "ConditionExpression": STILL_OURS,
                "ExpressionAttributeNames": {**_STATUS_NAME, "#ttl": "ttl"},
                "ExpressionAttributeValues": {
                    ":done": {"S": STATUS_DONE},
                    ":in_progress": {"S": STATUS_IN_PROGRESS},
                    ":token": {"S": claim.token},
                    ":now": {"N": f"{now:.3f}"},
                    ":ttl": {"N": str(int(now) + self._ttl)},
                },
            }
        }
        try:
            self._client.transact_write_items(TransactItems=[mark, *effect_writes])  # type: ignore[list-item]
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            codes = [str(reason.get("Code", "None")) for reason in reasons]
            if codes and codes[0] == "ConditionalCheckFailed":
                raise ClaimLost(f"the claim of {claim.event_id} was taken over") from exc
            if "ConditionalCheckFailed" in codes[1:]:
                raise EffectRefused(f"a condition of the effect's writes for {claim.event_id} failed") from exc
            raise DedupUnavailable(f"done mark of {claim.event_id}: {_code(exc)} {codes}") from exc
        except BotoCoreError as exc:
            raise DedupUnavailable(f"done mark of {claim.event_id}: {exc!r}") from exc

    def release(self, claim: Claim) -> None:
        """Give the claim back after a failure, so the next copy acts at once (only if it is still ours).

        Raises:
            DedupUnavailable: DynamoDB did not answer (the lease then runs out on its own).
        """
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={"event_id": {"S": claim.event_id}},
                ConditionExpression=STILL_OURS,
                ExpressionAttributeNames=_STATUS_NAME,
                ExpressionAttributeValues={":in_progress": {"S": STATUS_IN_PROGRESS}, ":token": {"S": claim.token}},
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise DedupUnavailable(f"release of {claim.event_id}: {_code(exc)}") from exc
        except BotoCoreError as exc:
            raise DedupUnavailable(f"release of {claim.event_id}: {exc!r}") from exc
