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
* ``pending``           state records stuck in ``pending`` (``--resend`` re-enqueues their orders).

Modules: :mod:`.aws` (clients, the stack, the pipeline's resources), :mod:`.dead_letters` (peek and redrive),
:mod:`.records` (the two tables), :mod:`.errors`, :mod:`.render` (timestamps, exact JSON) and
:mod:`.commands` (the click commands). The operations are plain functions over boto3 clients, so
they are usable and testable without the command line. Needs the ``ops`` extra (click).
"""

from idempotent_order_pipeline.cli.commands import cli, main

__all__ = ["cli", "main"]
