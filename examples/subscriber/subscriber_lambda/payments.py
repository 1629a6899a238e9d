"""Worked example (b): an external call made at most once per lease (handler ``payments.handler``).

A provider outside AWS cannot join the done transaction. The call carries the claim's token as its
idempotency key: one token per lease, so the provider sees each lease's call once however its
client retries, and two copies never call at the same time (the claim). A crash after the call and
before the done mark means the next lease calls again with a new key: at most once per lease, not
once overall (see docs/subscriber.md).
"""

from __future__ import annotations

import json
import os
import urllib.request

from idempotent_subscriber import Claim, OrderNotification, once_per_event


def charge(order_id: str, idempotency_key: str) -> None:
    """POST the charge to the payment provider (``PAYMENTS_URL``), keyed for the provider's deduplication."""
    request = urllib.request.Request(  # noqa: S310  (an https URL from the function's configuration)
        os.environ["PAYMENTS_URL"],
        data=json.dumps({"order_id": order_id}).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        response.read()


@once_per_event
def handler(notification: OrderNotification, claim: Claim) -> None:
    charge(notification.order_id, idempotency_key=claim.token)
