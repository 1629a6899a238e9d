"""Act once per order notification: the runtime helper of ``IdempotentSubscriber``.

Shipped in the ``idempotent-order-pipeline`` wheel and added to the subscriber's function as a
Lambda layer, where it is the top-level package ``idempotent_subscriber``. The team's handler::

    from idempotent_subscriber import Claim, OrderNotification, once_per_event

    @once_per_event
    def handler(notification: OrderNotification, claim: Claim) -> list[dict]:
        ...  # the effect: DynamoDB writes to return, or an external call keyed by claim.token

See ``docs/subscriber.md`` for the protocol and the two worked examples.
"""

from __future__ import annotations

from .batch import Effect, OncePerEvent, once_per_event
from .dedup import Busy, Claim, Deduplicator, Done
from .errors import ClaimLost, DedupUnavailable, EffectRefused, NotANotification, SubscriberError, TooManyWrites
from .notification import OrderNotification, parse

__all__ = [
    "Busy",
    "Claim",
    "ClaimLost",
    "DedupUnavailable",
    "Deduplicator",
    "Done",
    "Effect",
    "EffectRefused",
    "NotANotification",
    "OncePerEvent",
    "OrderNotification",
    "SubscriberError",
    "TooManyWrites",
    "once_per_event",
    "parse",
]
