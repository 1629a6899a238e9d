"""``python -m idempotent_order_pipeline.cli``: the same as the ``order-pipeline`` console script."""

from idempotent_order_pipeline.cli import main

main()
