"""The official Powertools for AWS Lambda (Python) layer, resolved at deploy time, never guessed.

The handler is tested against ``aws-lambda-powertools==3.37.0`` (requirements-test.txt, checked
equal to :data:`POWERTOOLS_VERSION` by a test); in Lambda it imports Powertools from this layer,
so the two move together.

Powertools publishes each release's layer version ARN as a public SSM parameter in every
commercial region (its install docs, "Using SSM Parameter Store"; its ``update_ssm.yml``
workflow writes ``/aws/service/powertools/python/{arch}/{python_version}/{version}``). That name
is the default of the stack's CloudFormation parameter ``PowertoolsLayerArn``, of type
``AWS::SSM::Parameter::Value<String>``: CloudFormation reads the ARN when it deploys, in the
stack's own region, so synthesis makes no AWS call and the layer number is never derived. A
release whose parameter is missing (it has happened once, powertools-lambda-python issue #7689)
fails the deploy with ``ParameterNotFound`` rather than deploying a wrong layer.

China (``aws-cn``) and GovCloud (``aws-us-gov``) have layers under other accounts, with other
layer numbers, and no such parameter: when the stack's region is known and lies there, synthesis
fails and says to pass ``powertools_layer=``. An environment-agnostic stack cannot know its
partition at synth: it gets a template rule (``PowertoolsLayerArnPartition``) asserting the
``aws`` partition, so CloudFormation refuses the deploy elsewhere before creating anything, with
the same advice (the parameter's description says it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# aws-cdk-lib is imported where it is used: the sandbox and the CLI read the constants below
# without starting jsii's Node process.
if TYPE_CHECKING:
    from aws_cdk import CfnParameter, Stack, aws_lambda
    from constructs import Construct

#: The Powertools release the handler is tested with (requirements-test.txt pins the same).
POWERTOOLS_VERSION = "3.37.0"
#: The function's architecture and runtime, as Powertools names them in the parameter path.
POWERTOOLS_ARCHITECTURE = "arm64"
POWERTOOLS_PYTHON_VERSION = "python3.14"


def layer_parameter_name(python_version: str, architecture: str) -> str:
    """The public parameter holding the layer version ARN of the pinned release for a runtime and architecture.

    ``python_version`` as Lambda names the runtime (``python3.13``), ``architecture`` as Lambda names it
    (``arm64``, ``x86_64``): Powertools' parameter path uses both names as they are
    (``/aws/service/powertools/python/{arch}/{python_version}/{version}``, its install docs).
    """
    return f"/aws/service/powertools/python/{architecture}/{python_version}/{POWERTOOLS_VERSION}"


#: The public parameter of the consumer's runtime and architecture.
POWERTOOLS_LAYER_PARAMETER = layer_parameter_name(POWERTOOLS_PYTHON_VERSION, POWERTOOLS_ARCHITECTURE)
#: The stack-level CloudFormation parameter (its logical id) through which the ARN is resolved, for the
#: consumer's runtime and architecture (another runtime's: :func:`layer_arn_parameter_id`).
LAYER_ARN_PARAMETER_ID = "PowertoolsLayerArn"


def layer_arn_parameter_id(python_version: str, architecture: str) -> str:
    """The stack parameter's logical id for a runtime and architecture: ``PowertoolsLayerArn`` for the
    consumer's (python3.14, arm64), else with both appended, e.g. ``PowertoolsLayerArnPython313X8664``."""
    if (python_version, architecture) == (POWERTOOLS_PYTHON_VERSION, POWERTOOLS_ARCHITECTURE):
        return LAYER_ARN_PARAMETER_ID
    words = f"{python_version} {architecture}".replace(".", "").replace("_", " ").split()
    return LAYER_ARN_PARAMETER_ID + "".join(word.capitalize() for word in words)


SSM_STRING_PARAMETER_TYPE = "AWS::SSM::Parameter::Value<String>"
#: The template rule of an environment-agnostic stack that checks the partition at deploy.
PARTITION_RULE_ID = "PowertoolsLayerArnPartition"
#: Partitions where Powertools publishes the parameter (only the commercial one).
PARTITIONS_WITH_PARAMETER = frozenset({"aws"})


def stack_partition(scope: Construct) -> str | None:
    """The partition of ``scope``'s stack when its region is known at synth, else None."""
    from aws_cdk import Stack, Token
    from aws_cdk.region_info import RegionInfo

    region = Stack.of(scope).region
    if Token.is_unresolved(region):
        return None
    partition = RegionInfo.get(region).partition
    return str(partition) if partition else None


def default_layer_problem(
    scope: Construct, python_version: str = POWERTOOLS_PYTHON_VERSION, architecture: str = POWERTOOLS_ARCHITECTURE
) -> str | None:
    """Why the default layer cannot be used in ``scope``'s stack (a validation error), or None."""
    from aws_cdk import Stack

    partition = stack_partition(scope)
    if partition is None or partition in PARTITIONS_WITH_PARAMETER:
        return None
    return (
        f"powertools_layer=None: Powertools publishes no SSM parameter "
        f"{layer_parameter_name(python_version, architecture)} in region "
        f"{Stack.of(scope).region} (partition {partition}); pass powertools_layer= (e.g. "
        "aws_lambda.LayerVersion.from_layer_version_arn with the layer ARN that the Powertools install docs "
        "list for that partition)"
    )


def default_powertools_layer(
    scope: Construct,
    construct_id: str,
    *,
    runtime: aws_lambda.Runtime | None = None,
    architecture: aws_lambda.Architecture | None = None,
) -> aws_lambda.ILayerVersion:
    """The public layer of the pinned release for ``runtime`` and ``architecture`` (default: the consumer's,
    python3.14 on arm64), its ARN read from Powertools' SSM parameter at deploy.

    Call only where :func:`default_layer_problem` found nothing (the constructs validate first).
    """
    from aws_cdk import Stack, aws_lambda

    stack = Stack.of(scope)
    parameter = layer_arn_parameter(
        stack,
        python_version=str(runtime.name) if runtime is not None else POWERTOOLS_PYTHON_VERSION,
        architecture=str(architecture.name) if architecture is not None else POWERTOOLS_ARCHITECTURE,
    )
    if stack_partition(scope) is None:
        _assert_partition_at_deploy(stack)
    return aws_lambda.LayerVersion.from_layer_version_arn(scope, construct_id, parameter.value_as_string)


def _assert_partition_at_deploy(stack: Stack) -> None:
    """For an environment-agnostic stack: a template rule that refuses partitions without the parameter."""
    from aws_cdk import Aws, CfnRule, CfnRuleAssertion, Fn

    if stack.node.try_find_child(PARTITION_RULE_ID) is not None:
        return
    (partition,) = PARTITIONS_WITH_PARAMETER
    CfnRule(
        stack,
        PARTITION_RULE_ID,
        assertions=[
            CfnRuleAssertion(
                assert_=Fn.condition_equals(Aws.PARTITION, partition),
                assert_description=(
                    f"Powertools publishes its layer parameter {POWERTOOLS_LAYER_PARAMETER} in the {partition} "
                    "partition only: synthesize with powertools_layer= (the layer ARN for this partition)"
                ),
            )
        ],
    )


def layer_arn_parameter(
    stack: Stack, *, python_version: str = POWERTOOLS_PYTHON_VERSION, architecture: str = POWERTOOLS_ARCHITECTURE
) -> CfnParameter:
    """The stack's ``PowertoolsLayerArn`` parameter for a runtime and architecture (one per stack and pair,
    shared by its pipelines and subscribers: :func:`layer_arn_parameter_id`).

    Its value is the *name* of an SSM parameter; CloudFormation deploys with that parameter's value.
    ``cdk deploy --parameters PowertoolsLayerArn=/my/own/parameter`` points it at another one.
    """
    from aws_cdk import CfnParameter

    parameter_id = layer_arn_parameter_id(python_version, architecture)
    existing = stack.node.try_find_child(parameter_id)
    if isinstance(existing, CfnParameter):
        return existing
    return CfnParameter(
        stack,
        parameter_id,
        type=SSM_STRING_PARAMETER_TYPE,
        default=layer_parameter_name(python_version, architecture),
        description=(
            f"SSM parameter holding the Powertools for AWS Lambda (Python) {POWERTOOLS_VERSION} layer ARN "
            f"({architecture}, {python_version}); public in commercial regions only, "
            "elsewhere synthesize with powertools_layer="
        ),
    )
