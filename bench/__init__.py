"""Side-by-side benchmark of four SQS order consumers on one moto stand-in (``make bench``).

Not part of the product: nothing under ``lambdas/`` or ``infra/`` imports this package. Modules:

* :mod:`bench.orders` - the generated orders and the SQS events that carry them;
* :mod:`bench.standin` - moto with a per-call network latency, a lock around moto's own work, call
  counts per operation, moto's own time per call and DynamoDB request units per call;
* :mod:`bench.units` - DynamoDB item sizes and request units by the pricing rules;
* :mod:`bench.prices` - on-demand prices (with their date and region) and USD per million orders;
* :mod:`bench.consumers` - ``naive``, ``seed`` and ``powertools`` (the peers) and ``ours`` (the product
  handler, unchanged);
* :mod:`bench.coldstart` - handler import time in a fresh interpreter;
* :mod:`bench.run` - the measurement; :mod:`bench.summary` - figures and targets;
  :mod:`bench.report` - results JSON, rich table, README section.

Keep this module and :mod:`bench.consumers` free of imports: the cold-import figure of each peer
is measured by importing its module in a fresh interpreter.
"""
