#!/usr/bin/env python3
"""The CDK app: one Stage per environment (placeholder until the construct lands)."""

from __future__ import annotations

import aws_cdk as cdk

app = cdk.App()
cdk.Stack(cdk.Stage(app, "dev"), "OrderPipeline")
app.synth()
