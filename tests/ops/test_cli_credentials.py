"""Without AWS credentials, a command says how to get them, the local stand-in's env file included."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli.aws import AwsClients


def test_missing_credentials_name_the_stand_ins_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a shell with a region but no credentials anywhere boto3 looks (no variables, files, metadata)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    # WHEN a command needs the stack
    result = CliRunner().invoke(cli, ["--stack", "Shop", "pipelines"], obj=AwsClients())
    # THEN it fails in one line with botocore's reason and both ways to get credentials
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith("Error: Unable to locate credentials: set AWS credentials (AWS_PROFILE or --profile")
    assert "source the env file `order-pipeline sandbox start` printed (.order-pipeline-sandbox/sandbox.env" in line
