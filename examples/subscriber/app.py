#!/usr/bin/env python3
"""The subscriber example as a CDK app: ``npx cdk synth --app "python examples/subscriber/app.py"``."""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk

sys.path.insert(0, str(Path(__file__).parent))

from stack import SubscriberStack

app = cdk.App()
SubscriberStack(app, "OrderSubscriberExample")
app.synth()
