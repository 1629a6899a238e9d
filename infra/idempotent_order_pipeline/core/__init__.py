"""What ``IdempotentOrderPipeline`` and ``IdempotentSubscriber`` share: both are an SQS-fed Lambda function.

After AWS Solutions Constructs' ``core/lib``: the constructs only wire these together.

* :mod:`.props` - how a prop is declared once (the dataclass field with its default, type, doc and
  allowed-type text), and what is generated from it: the constructor's ``:param`` docs, the docs'
  props table, the type check;
* :mod:`.rules` - the service limits and the prop rules both constructs need (batching, redrive,
  function, timeouts, retention, alarm naming), checked once, for both;
* :mod:`.sqs_function` - the builders: the queue and its dead-letter queue, the function's log group
  and least-privilege role, the SQS event source with its metrics, and the standard alarms.

The builders create their resources in the construct that calls them (never in a construct of their
own), so the logical ids stay those of the constructs' stateful resources.
"""
