"""A local stand-in for AWS that runs what ``cdk deploy`` puts into it (the ``sandbox`` extra).

Shipped in the distribution as its second top-level package, apart from the construct
(``idempotent_order_pipeline``) and the handler (``order_consumer``) on purpose: it imports and
patches moto in its own processes, and nothing here may leak into what runs in AWS. Its front is
the CLI, ``order-pipeline sandbox start|status|wait|stop`` (:mod:`idempotent_order_pipeline.cli.sandbox`).

Modules, in the order the stand-in uses them:

* :mod:`~order_pipeline_sandbox.control` - start, inspect and stop the stand-in (its state directory);
* :mod:`~order_pipeline_sandbox.standin` - the background process itself;
* :mod:`~order_pipeline_sandbox.server` - the moto server on ``localhost``, one request at a time;
* :mod:`~order_pipeline_sandbox.moto_patches` - the fixes to moto (reusable by any suite);
* :mod:`~order_pipeline_sandbox.deploy` - Powertools layer, ``cdk bootstrap`` and ``cdk deploy``;
* :mod:`~order_pipeline_sandbox.supervisor` - every SQS mapping and scheduled rule deployed, made live;
* :mod:`~order_pipeline_sandbox.function` - what was deployed: function config, mapping, code asset;
* :mod:`~order_pipeline_sandbox.lambda_runtime` - a process that runs a handler like a Lambda sandbox;
* :mod:`~order_pipeline_sandbox.poller` - the stand-in for the Lambda SQS poller.

``make demo`` (this repository only) adds :mod:`~order_pipeline_sandbox.demo`,
:mod:`~order_pipeline_sandbox.chaos`, :mod:`~order_pipeline_sandbox.traffic`,
:mod:`~order_pipeline_sandbox.checks`, :mod:`~order_pipeline_sandbox.outage` and
:mod:`~order_pipeline_sandbox.report` (``rich``): the same stand-in on this repository's app, with
chaos and invariant checks.
"""
