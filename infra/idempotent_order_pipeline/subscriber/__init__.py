"""``IdempotentSubscriber``: act once per order notification, with the team's own function.

The construct (:mod:`.construct`), its props (:mod:`.props`), the helper's layer (:mod:`.layer`)
and the findings it answers (:mod:`.findings`). The helper itself is the layer's package
``idempotent_subscriber`` (``idempotent_order_pipeline/_subscriber_layer/python/``).
"""

from __future__ import annotations

from idempotent_order_pipeline.subscriber.construct import IdempotentSubscriber

__all__ = ["IdempotentSubscriber"]
