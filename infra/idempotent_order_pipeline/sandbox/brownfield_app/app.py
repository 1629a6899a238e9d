#!/usr/bin/env python3
"""The brownfield app for the CDK CLI (``cdk deploy 'brownfield-existing/*'``, then ``'brownfield/*'``).

See :mod:`idempotent_order_pipeline.sandbox.brownfield`. The sandbox package is not installed: put ``infra/``
on the path, as the Makefile's ``PYTHONPATH`` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # infra/: the package idempotent_order_pipeline

from idempotent_order_pipeline.sandbox.brownfield import build_app  # after the path above

if __name__ == "__main__":
    build_app().synth()
