from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    """A moto DynamoDB client; each test's worlds use their own table prefixes."""
    with mock_aws():
        yield boto3.client("dynamodb")
