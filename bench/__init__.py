"""The benchmark of the SQS order consumers (``make bench``); the method is in ``docs/benchmark.md``.

Not part of the product: nothing under ``lambdas/`` or ``infra/`` imports this package. Modules:

* :mod:`bench.orders` - the generated orders and the SQS events that carry them;
* :mod:`bench.consumers` - ``naive``, ``seed`` and ``powertools`` (the peers) and ``ours`` (the product
  handler, a black box configured only by its environment variables);
* moto in-process, for correctness, calls and units: :mod:`bench.standin` (moto with a per-call
  latency, a lock around moto's own work, call counts, request units and billed SNS/SQS requests per
  call) and :mod:`bench.run` (the consumers interleaved on the same orders);
* Lambda's CPU: :mod:`bench.http_standin` (AWS-shaped answers over HTTP, a fixed latency after each
  request arrived, in its own process), :mod:`bench.cgroups` (a CPU quota per process, the memory's
  share of one core), :mod:`bench.worker` (one consumer in its own process) and :mod:`bench.capped`
  (the memory sweep, interleaved), :mod:`bench.components` (CPU by component from a cProfile of
  every thread);
* :mod:`bench.units` - DynamoDB request units and SNS/SQS billed requests by the services' rules;
* :mod:`bench.prices` - on-demand prices (with their date and region) and USD per million orders;
* :mod:`bench.coldstart` - import plus client creation in fresh interpreters;
* :mod:`bench.summary` - figures, the memory recommendation and the targets; :mod:`bench.report` -
  results JSON, rich tables, README section; :mod:`bench.chart` - the memory-sweep PNG.

Keep this module and :mod:`bench.consumers` free of imports: the cold-start figure of each peer
is measured by importing its module in a fresh interpreter.
"""
