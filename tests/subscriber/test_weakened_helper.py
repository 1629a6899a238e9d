"""Negative controls: each scenario of ``test_once.py`` fails against a deliberately weakened helper.

A scenario that passed whatever the helper did would prove nothing; each weakening below is a
plausible bug, and the scenario meant to catch it must raise AssertionError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import batch, dedup
from tests.subscriber import scenarios


def _effect_then_mark(
    self: dedup.Deduplicator, claim: dedup.Claim, effect_writes: Sequence[Mapping[str, Any]] = ()
) -> None:
    """Weakened complete: the effect's writes in one call, the done mark in another (not atomic)."""
    if effect_writes:
        self._client.transact_write_items(TransactItems=list(effect_writes))  # type: ignore[arg-type]
    original_complete(self, claim, ())


original_complete = dedup.Deduplicator.complete


def _retry_effect_in_claim(self: batch.OncePerEvent, notification: Any, claim: dedup.Claim) -> bool:
    """Weakened handling: on a failure, run the effect again under the same claim before giving up."""
    for _ in range(2):
        try:
            self.dedup.complete(claim, self._effect(notification, claim) or ())
            return True
        except dedup.ClaimLost:
            return True
        except Exception:  # noqa: S112  (the weakening under test)
            continue
    self._release(claim)
    return False


WEAKENINGS: dict[str, dict[str, Any]] = {
    # The done mark and the effect's writes in two calls: a crash between them repeats the effect.
    "mark-apart-from-effect": {"complete": _effect_then_mark},
    # The claim also takes a done event (its lease attribute is gone): a later copy repeats the effect.
    "claim-ignores-done": {
        "FREE_TO_CLAIM": "attribute_not_exists(event_id) OR attribute_not_exists(lease_expires_at) "
        "OR (#status = :in_progress AND lease_expires_at < :now)"
    },
    # The mark checks the status only: a claim whose lease ran out still commits after a takeover.
    "mark-ignores-token": {"STILL_OURS": "#status = :in_progress AND :token = :token"},
    # No takeover: a claim whose holder crashed is never claimed again.
    "no-takeover": {
        "FREE_TO_CLAIM": "attribute_not_exists(event_id) OR (#status = :in_progress AND lease_expires_at < :now "
        "AND attribute_not_exists(event_id))"
    },
    # The effect is run again under the same claim after a failure: the lease's key is used twice.
    "effect-retried-in-one-lease": {"_act": _retry_effect_in_claim},
}


@pytest.fixture
def weakened(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name = request.param
    for attribute, value in WEAKENINGS[name].items():
        if attribute == "complete":
            monkeypatch.setattr(dedup.Deduplicator, "complete", value)
        elif attribute == "_act":
            monkeypatch.setattr(batch.OncePerEvent, "_act", value)
        else:
            monkeypatch.setattr(dedup, attribute, value)
    return str(name)


@pytest.mark.parametrize(
    ("weakened", "effect", "kind"),
    [
        ("mark-apart-from-effect", "counting", "crash-after"),
        ("no-takeover", "counting", "crash-before"),
        ("effect-retried-in-one-lease", "paying", "error"),
    ],
    indirect=["weakened"],
)
def test_a_failure_at_every_call_catches(dynamodb: Any, weakened: str, effect: str, kind: str) -> None:
    # GIVEN a weakened helper / WHEN every call fails in turn / THEN the scenario finds the violation
    with pytest.raises(AssertionError):
        scenarios.every_call_fails_once(dynamodb, effect, kind)


@pytest.mark.parametrize("weakened", ["claim-ignores-done"], indirect=True)
@pytest.mark.parametrize("effect", ["counting", "paying"])
def test_three_copies_at_once_catches(dynamodb: Any, weakened: str, effect: str) -> None:
    # GIVEN a claim that takes done events / WHEN three copies race / THEN the scenario finds a second effect
    with pytest.raises(AssertionError):
        scenarios.three_copies_at_once(dynamodb, effect)


@pytest.mark.parametrize("weakened", ["mark-ignores-token", "no-takeover"], indirect=True)
def test_a_lease_that_runs_out_catches(dynamodb: Any, weakened: str) -> None:
    # GIVEN a mark that ignores the token, or no takeover / WHEN the lease runs out mid-effect
    # THEN the scenario finds the first copy's transaction applied, or no takeover
    with pytest.raises(AssertionError):
        scenarios.lease_runs_out_mid_effect(dynamodb)
