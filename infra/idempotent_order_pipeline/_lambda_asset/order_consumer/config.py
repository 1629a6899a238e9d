"""The consumer's settings, read from the environment the construct sets."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .contract.errors import ConfigurationError
from .contract.keys import DEFAULT_IDENTITY_FIELDS, parse_identity_fields
from .contract.names import (
    DEAD_LETTER_QUEUE_URL_VARIABLE,
    DEFAULT_RECORD_TTL_SECONDS,
    IDENTITY_FIELDS_VARIABLE,
    NOTIFICATION_ATTRIBUTES_VARIABLE,
    NOTIFICATION_BODY_VARIABLE,
    ORDER_RECORDS_TABLE_VARIABLE,
    PROCESSED_EVENTS_TABLE_VARIABLE,
    RECORD_TTL_SECONDS_VARIABLE,
    REQUIRED_VARIABLES,
    TOPIC_ARN_VARIABLE,
)
from .contract.notification import NotificationFormat


@dataclass(frozen=True)
class Settings:
    """What the handler needs to know about its resources."""

    processed_events_table: str
    order_records_table: str
    topic_arn: str
    dead_letter_queue_url: str
    record_ttl_seconds: int = DEFAULT_RECORD_TTL_SECONDS
    identity_fields: tuple[str, ...] = DEFAULT_IDENTITY_FIELDS
    notification_format: NotificationFormat = NotificationFormat()  # noqa: RUF009 - frozen, shared

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the settings; raise ConfigurationError naming every missing or invalid variable."""
        env = os.environ if environ is None else environ
        missing = [name for name in REQUIRED_VARIABLES if not env.get(name)]
        if missing:
            raise ConfigurationError(f"missing required environment variable(s): {', '.join(missing)}")
        raw_ttl = env.get(RECORD_TTL_SECONDS_VARIABLE) or str(DEFAULT_RECORD_TTL_SECONDS)
        if not raw_ttl.isdigit() or int(raw_ttl) <= 0:
            raise ConfigurationError(
                f"{RECORD_TTL_SECONDS_VARIABLE}={raw_ttl!r}: expected a positive whole number of seconds"
            )
        try:
            identity_fields = parse_identity_fields(env.get(IDENTITY_FIELDS_VARIABLE))
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc
        try:
            notification_format = NotificationFormat.parse(
                env.get(NOTIFICATION_ATTRIBUTES_VARIABLE), env.get(NOTIFICATION_BODY_VARIABLE)
            )
        except ValueError as exc:
            raise ConfigurationError(
                f"{NOTIFICATION_ATTRIBUTES_VARIABLE} / {NOTIFICATION_BODY_VARIABLE}: {exc}"
            ) from exc
        return cls(
            processed_events_table=env[PROCESSED_EVENTS_TABLE_VARIABLE],
            order_records_table=env[ORDER_RECORDS_TABLE_VARIABLE],
            topic_arn=env[TOPIC_ARN_VARIABLE],
            dead_letter_queue_url=env[DEAD_LETTER_QUEUE_URL_VARIABLE],
            record_ttl_seconds=int(raw_ttl),
            identity_fields=identity_fields,
            notification_format=notification_format,
        )
