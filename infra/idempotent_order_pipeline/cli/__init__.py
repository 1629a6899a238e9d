"""``order-pipeline``: the operator CLI of a deployed pipeline (also ``python -m idempotent_order_pipeline.cli``).

Every command finds its resources in the stack itself: the construct marks its queues, tables,
topic and function with template metadata (:mod:`idempotent_order_pipeline.discovery`), so an
operator names only the stack (``--stack``, and ``--endpoint-url`` for the local sandbox), and
``--pipeline PATH`` when the stack holds several pipelines; ``--queue-url`` and the like override
what was found. A stack deployed before the metadata existed is read through ``app.py``'s outputs.

* ``pipelines``         every pipeline of the stack, with its resources;

* ``send FILE|-``       JSON lines of orders -> the queue, through the producer client;
* ``inspect EVENT_ID``  (or ``--order ORDER_ID``) the state record, the order row, whether notified;
* ``dlq list``          the parked messages with their ``error_code``, without consuming them;
* ``dlq drop``          delete selected parked messages for good (printed as a record);
* ``redrive``           the DLQ back to the queue (StartMessageMoveTask, else receive-send-delete);
* ``pending``           state records stuck in ``pending`` (``--resend`` re-enqueues their orders);
* ``migrate``           state records of older releases into today's shape (:mod:`.migrate`);
* ``smoke``             the acceptance check of a deployment: canary orders through it, then removed;
* ``sandbox``           ``start|status|wait|stop`` the local stand-in for AWS (the ``sandbox`` extra);
* ``upgrade-check``     what a deploy replaces or removes, exit 1 where data can be lost (:mod:`.upgrade_check`).

Modules: :mod:`.aws` (clients, the stack, the pipeline's resources), :mod:`.dead_letters` (peek and redrive),
:mod:`.records` (the two tables), :mod:`.inbox` (``smoke``'s temporary subscription), :mod:`.errors`,
:mod:`.render` (timestamps, exact JSON), :mod:`.smoke` and :mod:`.migrate` (commands in modules of their own),
:mod:`.sandbox` (the stand-in's commands, a front for ``idempotent_order_pipeline.sandbox``) and
:mod:`.commands` (the click commands). The operations are plain functions over boto3 clients, so
they are usable and testable without the command line. Needs the ``ops`` extra (click).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from idempotent_order_pipeline.cli.commands import cli

__all__ = ["cli", "main"]

#: The modules the ``ops`` extra installs (boto3 brings botocore).
OPS_EXTRA_MODULES = frozenset({"click", "boto3", "botocore"})
OPS_EXTRA_HINT = (
    "order-pipeline needs the 'ops' extra ({missing} is not installed): pip install 'idempotent-order-pipeline[ops]'"
)


def main() -> None:
    """The ``order-pipeline`` console script; without the ``ops`` extra, a one-line hint and exit code 1."""
    try:
        from idempotent_order_pipeline.cli.commands import main as run
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in OPS_EXTRA_MODULES:
            raise
        sys.exit(OPS_EXTRA_HINT.format(missing=exc.name))
    run()


def __getattr__(name: str) -> Any:
    # ``cli`` (the click group) is imported on first use, so that ``main`` can explain a missing click.
    if name == "cli":
        from idempotent_order_pipeline.cli.commands import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
