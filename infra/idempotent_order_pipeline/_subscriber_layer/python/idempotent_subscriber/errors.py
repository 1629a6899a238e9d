"""Every error of the subscriber helper, under one base class."""

from __future__ import annotations


class SubscriberError(Exception):
    """Base of the helper's errors."""


class NotANotification(SubscriberError):
    """The record is not one of the pipeline's notifications: it can never be processed."""


class DedupUnavailable(SubscriberError):
    """DynamoDB did not answer a call of the protocol (a throttle, an error): nothing to decide, retry later."""


class ClaimLost(SubscriberError):
    """Our lease ran out and another copy took the claim: our transaction wrote nothing, that copy acts."""


class EffectRefused(SubscriberError):
    """A condition of the effect's own writes failed: the transaction wrote nothing, not even the done mark."""


class TooManyWrites(SubscriberError):
    """The effect returned more writes than one transaction holds next to the done mark."""
