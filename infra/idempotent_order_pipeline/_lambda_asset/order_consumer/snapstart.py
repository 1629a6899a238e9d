"""Lambda SnapStart: what every execution environment restored from one snapshot must not share.

With the construct's ``snap_start=True``, Lambda runs the init phase once per published version
(the handler's import, which creates the DynamoDB and SNS clients: :mod:`order_consumer.runtime`),
snapshots the memory, and starts every later execution environment from that snapshot. Restored
environments would otherwise share

* the clients' connection pools (sockets opened before the snapshot are dead after a restore) and
  the credentials they resolved;
* the state of :mod:`random`, seeded once at import: botocore draws its retry backoff jitter from
  it, so every restored environment would back off in step with the others after a throttle;
* a pipeline built before the snapshot (never in Lambda, whose first invocation comes after the
  restore; dropped anyway, since it holds the old clients).

:func:`after_restore` replaces each. :func:`register` registers it with the runtime's hook library
(``snapshot_restore_py``, shipped in Lambda's Python managed runtimes) when Lambda says the
environment is being prepared for SnapStart, and does nothing otherwise (no import attempted).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping

#: ``AWS_LAMBDA_INITIALIZATION_TYPE``'s value in an init phase that ends in a snapshot.
SNAP_START = "snap-start"
INITIALIZATION_TYPE_VARIABLE = "AWS_LAMBDA_INITIALIZATION_TYPE"

#: Called after a restore, in this order (by :func:`after_restore`): each drops or re-creates one thing.
_resets: list[Callable[[], None]] = []


def on_restore(reset: Callable[[], None]) -> Callable[[], None]:
    """Add ``reset`` to what :func:`after_restore` runs (a decorator; the module that owns the state registers)."""
    _resets.append(reset)
    return reset


def after_restore() -> None:
    """Make this environment's own: a new random seed, then every registered reset (new clients, no pipeline)."""
    random.seed()  # from os.urandom: different in every restored environment
    for reset in _resets:
        reset()


def register(environ: Mapping[str, str] | None = None) -> bool:
    """Register :func:`after_restore` with Lambda's runtime hooks if this init phase ends in a snapshot.

    Returns whether it registered.
    """
    env = os.environ if environ is None else environ
    if env.get(INITIALIZATION_TYPE_VARIABLE) != SNAP_START:
        return False
    # only in Lambda's Python runtimes (no stubs anywhere)
    from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]

    register_after_restore(after_restore)
    return True
