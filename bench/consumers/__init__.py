"""The four consumers. Each module is a Lambda handler module: ``handler(event, context)``.

The peers (``naive``, ``seed``, ``powertools``) take their clients and table names through
``configure(dynamodb=..., sns=..., env=...)``, so that importing them creates no client (the
cold-import figure then compares code, as the product's handler creates its clients lazily too).
``ours`` is the product's ``order_consumer.handler``, unchanged; :mod:`bench.run` wires it with its
own ``configure`` and :class:`order_consumer.runtime.Clients`.

No imports here: a fresh interpreter imports a peer's module to time it.
"""
