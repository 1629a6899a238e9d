from __future__ import annotations

from typing import Any

import pytest

from bench import deployment


@pytest.fixture(scope="session")
def deployed() -> dict[str, Any]:
    """The default pipeline's facts (tables, reconciler, alarms), synthesized in a fresh interpreter."""
    return deployment.load()
