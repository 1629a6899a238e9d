"""``ours``: the product's handler, ``order_consumer.handler.handler``, as a black box.

Nothing of the product is configured from here: it reads its own environment variables (set by
:mod:`bench.run` before the first invocation, as Lambda sets them before the init phase) and makes
its own clients, whenever and however its code does. This module is imported inside the moto
stand-in, so clients the product creates at import reach moto too. The cold-import figure imports
``order_consumer.handler`` itself, not this adapter.
"""

from __future__ import annotations

from order_consumer.handler import handler

__all__ = ["handler"]
