"""The official Powertools for AWS Lambda (Python) public layer matching the pinned library version.

The handler is tested against ``aws-lambda-powertools==3.37.0`` (requirements-dev.txt); in Lambda
it imports Powertools from this layer, so the two must move together.

Layer version for 3.37.0: 40. How it was derived (no AWS call is possible here; verify with
``aws ssm get-parameter --name /aws/service/powertools/python/arm64/python3.14/3.37.0``):
Powertools publishes one layer version per release, the same number for every runtime and
architecture. Known points: 3.23.0 = 27 (powertools-lambda-python issue #7689), 3.28.0 = 32 and
3.31.1 = 36 (public projects pinning those pairs), one per release in between; 3.32.0 and 3.33.0
were never built or published (issue #8377), so 3.34.0 = 37, 3.35.0 = 38, 3.36.0 = 39,
3.37.0 = 40.
"""

from __future__ import annotations

from aws_cdk import Stack, aws_lambda
from constructs import Construct

POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_LAYER_VERSION = 40
#: The AWS account that publishes the layer in the commercial ``aws`` partition (China and
#: GovCloud use other accounts: pass ``powertools_layer`` there).
POWERTOOLS_PUBLISHER_ACCOUNT = "017000801446"
POWERTOOLS_LAYER_NAME = "AWSLambdaPowertoolsPythonV3-python314-arm64"


def powertools_layer_arn(region: str) -> str:
    """The layer version ARN in ``region`` (a token in an environment-agnostic stack)."""
    return (
        f"arn:aws:lambda:{region}:{POWERTOOLS_PUBLISHER_ACCOUNT}:layer:"
        f"{POWERTOOLS_LAYER_NAME}:{POWERTOOLS_LAYER_VERSION}"
    )


def default_powertools_layer(scope: Construct, construct_id: str) -> aws_lambda.ILayerVersion:
    """The public layer, in the region of ``scope``'s stack."""
    arn = powertools_layer_arn(Stack.of(scope).region)
    return aws_lambda.LayerVersion.from_layer_version_arn(scope, construct_id, arn)
