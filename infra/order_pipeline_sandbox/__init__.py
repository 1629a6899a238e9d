"""A local rehearsal of the real deployment: moto server, real ``cdk deploy``, a local SQS poller.

Development only: this package is not part of the distribution (``pyproject.toml`` lists the
packages it ships, and this is not one of them). It lives apart from the construct
(``idempotent_order_pipeline``) and the handler (``order_consumer``) on purpose: nothing here may
leak into what runs in AWS.

Modules, in the order ``make demo`` uses them:

* :mod:`~order_pipeline_sandbox.moto_patches` - the DynamoDB transaction fix (reusable by any suite);
* :mod:`~order_pipeline_sandbox.server` - the moto server on ``localhost``, one request at a time;
* :mod:`~order_pipeline_sandbox.deploy` - Powertools layer, ``cdk bootstrap`` and ``cdk deploy``;
* :mod:`~order_pipeline_sandbox.function` - what was deployed: function config, mapping, code asset;
* :mod:`~order_pipeline_sandbox.lambda_runtime` - a process that runs the handler like a Lambda sandbox;
* :mod:`~order_pipeline_sandbox.poller` - the development stand-in for the Lambda SQS poller;
* :mod:`~order_pipeline_sandbox.traffic` and :mod:`~order_pipeline_sandbox.checks` - orders in,
  invariants out; :mod:`~order_pipeline_sandbox.demo` ties them together and prints the report.
"""
