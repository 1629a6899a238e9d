"""The functions' SDK clients honour the service-specific endpoint variables the construct sets.

With ``create_vpc_endpoints`` and private DNS off (the default), the construct points
``AWS_ENDPOINT_URL_SNS`` and ``AWS_ENDPOINT_URL_SQS`` at its interface endpoints' DNS names
(tests/infra/test_options.py checks the template). That only works if the clients are made without an
``endpoint_url`` of their own: these tests make the consumer's and the reconciler's clients as they are
made in Lambda and read the endpoint each one calls. No request is sent.
"""

from __future__ import annotations

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import runtime
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    SNS_ENDPOINT_URL_VARIABLE,
    SQS_ENDPOINT_URL_VARIABLE,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciler import ReconcilerClients

SNS_ENDPOINT = "https://vpce-0123456789abcdef0-abcdefgh.sns.eu-west-1.vpce.amazonaws.com"
SQS_ENDPOINT = "https://vpce-0fedcba9876543210-hgfedcba.sqs.eu-west-1.vpce.amazonaws.com"


@pytest.fixture
def endpoint_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SNS_ENDPOINT_URL_VARIABLE, SNS_ENDPOINT)
    monkeypatch.setenv(SQS_ENDPOINT_URL_VARIABLE, SQS_ENDPOINT)
    monkeypatch.delenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", raising=False)


@pytest.mark.usefixtures("endpoint_variables")
def test_the_consumers_clients_call_the_endpoints_the_variables_name() -> None:
    # GIVEN the variables the construct sets when private DNS is off
    # WHEN the consumer makes its clients as in Lambda (DynamoDB and SNS at init, SQS at the first park)
    clients = runtime.Clients.from_default_session()
    sqs = runtime.sqs_client()
    # THEN SNS and SQS calls go to the VPC endpoints, DynamoDB (a gateway endpoint: routes) to its regional name
    assert clients.sns.meta.endpoint_url == SNS_ENDPOINT
    assert sqs.meta.endpoint_url == SQS_ENDPOINT
    assert clients.dynamodb.meta.endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"


@pytest.mark.usefixtures("endpoint_variables")
def test_the_reconcilers_clients_call_the_endpoints_the_variables_name() -> None:
    # GIVEN the same variables
    # WHEN the reconciler makes its clients
    clients = ReconcilerClients.from_default_session()
    # THEN it publishes through the SNS endpoint; DynamoDB keeps its regional name
    assert clients.sns.meta.endpoint_url == SNS_ENDPOINT
    assert clients.dynamodb.meta.endpoint_url == "https://dynamodb.eu-west-1.amazonaws.com"


def test_without_the_variables_the_clients_call_the_regional_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no endpoint variable (private DNS on, or no VPC)
    for name in (SNS_ENDPOINT_URL_VARIABLE, SQS_ENDPOINT_URL_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    # WHEN the consumer makes its clients / THEN they call the services' regional names
    clients = runtime.Clients.from_default_session()
    assert clients.sns.meta.endpoint_url == "https://sns.eu-west-1.amazonaws.com"
    assert runtime.sqs_client().meta.endpoint_url == "https://sqs.eu-west-1.amazonaws.com"
