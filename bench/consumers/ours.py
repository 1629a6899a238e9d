"""``ours``: the product's handler, ``order_consumer.handler.handler``, unchanged.

Wired through its own test seam, ``order_consumer.handler.configure``, with clients built by the
product's ``Clients.from_default_session()`` (its retry and connection-pool configuration) inside
the stand-in. The cold-import figure imports ``order_consumer.handler`` itself, not this adapter.
"""

from __future__ import annotations

from collections.abc import Mapping

from order_consumer import handler as product
from order_consumer.runtime import Clients

handler = product.handler


def configure(*, env: Mapping[str, str]) -> Clients:
    """Build the product's default clients (inside ``mock_aws``) and hand them and ``env`` to the handler."""
    clients = Clients.from_default_session()
    product.configure(clients, env)
    return clients


def reset() -> None:
    """Back to the handler's default wiring (clients from the default session, settings from os.environ)."""
    product.configure()
