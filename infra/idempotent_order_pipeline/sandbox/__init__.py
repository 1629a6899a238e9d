"""A local stand-in for AWS that runs what ``cdk deploy`` puts into it (the ``sandbox`` extra).

A subpackage of the library that nothing else in it imports: importing ``idempotent_order_pipeline``
(the construct, the producer, the CLI) never imports this package, and this package's ``__init__``
imports nothing, so moto is imported and patched only in the stand-in's own processes, when one
starts (:func:`~idempotent_order_pipeline.sandbox.moto_patches.apply`), and nothing of it can leak
into what runs in AWS. tests/infra/test_installed_package.py checks both. Its front is
the CLI, ``order-pipeline sandbox start|status|wait|stop`` (:mod:`idempotent_order_pipeline.cli.sandbox`).

Modules, in the order the stand-in uses them:

* :mod:`~idempotent_order_pipeline.sandbox.control` - start, inspect and stop the stand-in (its state directory);
* :mod:`~idempotent_order_pipeline.sandbox.standin` - the background process itself;
* :mod:`~idempotent_order_pipeline.sandbox.server` - the moto server on ``localhost``, one request at a time;
* :mod:`~idempotent_order_pipeline.sandbox.moto_patches` - the fixes to moto (reusable by any suite), with
  :mod:`~idempotent_order_pipeline.sandbox.moto_cloudformation` and
  :mod:`~idempotent_order_pipeline.sandbox.moto_stack_resources` (CloudFormation's read APIs in AWS's shape)
  and :mod:`~idempotent_order_pipeline.sandbox.partiql` (the PartiQL ``UPDATE`` subset, without moto);
* :mod:`~idempotent_order_pipeline.sandbox.deploy` - Powertools layer, ``cdk bootstrap`` and ``cdk deploy``;
* :mod:`~idempotent_order_pipeline.sandbox.supervisor` - every SQS mapping and scheduled rule deployed, made live;
* :mod:`~idempotent_order_pipeline.sandbox.function` - what was deployed: function config, mapping, code asset;
* :mod:`~idempotent_order_pipeline.sandbox.runtimes` - which Python runs a function of each runtime, and its SDK;
* :mod:`~idempotent_order_pipeline.sandbox.lambda_runtime` - a process that runs a handler like a Lambda sandbox;
* :mod:`~idempotent_order_pipeline.sandbox.poller` - the stand-in for the Lambda SQS poller.

``make demo`` (this repository only) adds :mod:`~idempotent_order_pipeline.sandbox.demo`,
:mod:`~idempotent_order_pipeline.sandbox.chaos`, :mod:`~idempotent_order_pipeline.sandbox.traffic`,
:mod:`~idempotent_order_pipeline.sandbox.checks`, :mod:`~idempotent_order_pipeline.sandbox.outage` and
:mod:`~idempotent_order_pipeline.sandbox.report` (``rich``): the same stand-in on this repository's app, with
chaos and invariant checks.
"""
