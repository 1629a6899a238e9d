"""The runtime helper as a Lambda layer, built from the wheel's own package (no copy, no bundling).

The helper (``idempotent_subscriber``) lives in this distribution at
``_subscriber_layer/python/idempotent_subscriber``: ``_subscriber_layer`` is the layer's asset root
and ``python/`` is where Lambda looks for a Python layer's packages (``/opt/python`` is on
``sys.path``). A layer rather than bundling into the team's code: the team's ``code`` stays
whatever ``aws_lambda.Code`` they give (an asset, an S3 object, a Docker-built bundle), nothing is
copied into it, synthesis needs no Docker, and the helper's version is the wheel's, one asset per
stack whatever the number of subscribers.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Stack, aws_lambda
from constructs import Construct

from idempotent_order_pipeline.asset import code_from
from idempotent_order_pipeline.subscriber.props import LAYER_RUNTIMES

#: The layer's asset root, in a source checkout and in an installed distribution alike.
LAYER_ROOT = Path(__file__).resolve().parent.parent / "_subscriber_layer"
#: The one layer of a stack, shared by its subscribers (a stack-level id: never concatenated).
LAYER_ID = "IdempotentSubscriberRuntimeLayer"


def runtime_layer(scope: Construct) -> aws_lambda.ILayerVersion:
    """The stack's layer holding ``idempotent_subscriber``, created by the first subscriber of the stack."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child(LAYER_ID)
    if isinstance(existing, aws_lambda.LayerVersion):
        return existing
    return aws_lambda.LayerVersion(
        stack,
        LAYER_ID,
        code=code_from(LAYER_ROOT),
        compatible_runtimes=list(LAYER_RUNTIMES),
        compatible_architectures=[aws_lambda.Architecture.ARM_64, aws_lambda.Architecture.X86_64],
        description="idempotent_subscriber: act once per order notification (claim, done mark, release).",
    )
