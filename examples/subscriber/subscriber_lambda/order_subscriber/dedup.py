"""Once per ``event_id``: a claim with a lease, then a ``done`` mark, in a DynamoDB table of its own.

The pipeline announces each order at least once (a redelivery, the reconciler or two concurrent
runs can send the same notification again; SNS FIFO deduplicates for 5 minutes only). Every
notification carries its ``event_id``, the same for every copy. This table, key ``event_id``, holds::

    status = in_progress, claim_token, lease_expires_at    a delivery is acting on it
    status = done, done_at                                 the effect happened; later copies are skipped

Per copy:

    claim  (PutItem, condition NEW_OR_LEASE_EXPIRED)
        won                -> run the effect -> complete (TransactWriteItems: the done mark, condition
                              STILL_OURS, plus the effect's own writes) -> acknowledge
        effect raised      -> release (lease ends now, condition STILL_OURS) -> redeliver
        crashed halfway    -> nothing to do: the lease expires and a redelivery claims it again
        lost: done         -> acknowledge (duplicate)
        lost: in progress  -> redeliver later (another copy is being handled right now)

Exactly one effect needs the effect to be part of the ``done`` transaction (its writes are passed
to :meth:`Deduplicator.complete`), or an external call that takes ``event_id`` as its idempotency
key: a crash after the call and before the mark repeats the call, and only the key makes that
harmless. The lease must outlast one invocation (the function timeout), and the queue's
visibility timeout must exceed the lease, so a redelivery after a crash finds it expired.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

STATUS_IN_PROGRESS = "in_progress"
STATUS_DONE = "done"

# --- Conditions ------------------------------------------------------------------------------------
# First copy of this event, or the claim of a copy that crashed halfway has run out.
NEW_OR_LEASE_EXPIRED = "attribute_not_exists(event_id) OR (#status = :in_progress AND lease_expires_at < :now)"
# Our claim still stands: nobody took over after our lease ran out.
STILL_OURS = "#status = :in_progress AND claim_token = :token"


@dataclass(frozen=True)
class Claim:
    """This delivery's right to act on ``event_id`` until ``lease_expires_at``."""

    event_id: str
    token: str
    lease_expires_at: float


class Done:
    """The effect already happened (a duplicate copy): acknowledge it."""


class Busy:
    """Another copy holds an unexpired claim: let SQS redeliver this one later."""


class Deduplicator:
    """Claims, completes and releases events in the deduplication table. Thread-safe."""

    def __init__(
        self,
        *,
        client: DynamoDBClient,
        table: str,
        lease_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table
        self._lease = lease_seconds
        self._clock = clock

    def claim(self, event_id: str) -> Claim | Done | Busy:
        """Take the event for this delivery, or say why not."""
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
                },
                ConditionExpression=NEW_OR_LEASE_EXPIRED,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":in_progress": {"S": STATUS_IN_PROGRESS}, ":now": {"N": f"{now:.3f}"}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            existing: Any = exc.response.get("Item") or {}
            return Done() if existing.get("status", {}).get("S") == STATUS_DONE else Busy()
        return claim

    def complete(self, claim: Claim, effect_writes: Sequence[Mapping[str, Any]] = ()) -> bool:
        """Mark the event done, atomically with the effect's own writes (TransactWriteItems entries).

        Returns:
            True if marked; False if the claim was lost (its lease ran out and another copy took it):
            then nothing was written, and that copy does the effect.
        """
        mark = {
            "Update": {
                "TableName": self._table,
                "Key": {"event_id": {"S": claim.event_id}},
                "UpdateExpression": "SET #status = :done, done_at = :now REMOVE claim_token, lease_expires_at",
                "ConditionExpression": STILL_OURS,
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":done": {"S": STATUS_DONE},
                    ":in_progress": {"S": STATUS_IN_PROGRESS},
                    ":token": {"S": claim.token},
                    ":now": {"N": f"{self._clock():.3f}"},
                },
            }
        }
        try:
            self._client.transact_write_items(TransactItems=[mark, *effect_writes])  # type: ignore[list-item]
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons", [])  # type: ignore[typeddict-item]
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            raise
        return True

    def release(self, claim: Claim) -> None:
        """After a failed effect: end the lease now, so the next copy retries at once."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"event_id": {"S": claim.event_id}},
                UpdateExpression="SET lease_expires_at = :zero",
                ConditionExpression=STILL_OURS,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":zero": {"N": "0"},
                    ":in_progress": {"S": STATUS_IN_PROGRESS},
                    ":token": {"S": claim.token},
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
