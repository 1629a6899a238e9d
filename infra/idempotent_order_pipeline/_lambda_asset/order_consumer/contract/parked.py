"""The parked-message contract: what the consumer adds to a message it sends to the DLQ.

Shared by the consumer (which parks) and the operator CLI (which lists, drops and redrives), so the
two can never disagree on the attribute names.

A parked message carries the reason (``error_code``, ``error_message``, ``source_message_id``) and
one more attribute, :data:`PARKED_ATTRIBUTE`, whose value is a JSON envelope with a version field:
``{"version": 1, "added": [names the consumer added], "packed": {original attributes}}``
(``packed`` only when the originals did not fit beside the reason, or when one of them has a
reserved name). Nothing is trusted by its name alone: only an attribute of that name whose value
is exactly such an envelope marks a message as parked, and only the names the envelope lists are
removed again. A producer's own ``error_code`` or ``original_attributes`` is therefore an ordinary
attribute: the consumer packs it (a reserved name) or copies it, and a redrive returns it as sent.

Nothing signs the envelope (a signature needs a secret the consumer does not have), so what makes it
the consumer's is how the message reached the DLQ. Only the consumer's role may send there (the
construct grants SendMessage on the DLQ to no one else), and it always writes its own envelope,
replacing any it received. A producer can still put a well-formed envelope on a message it sends to
the orders queue; if that message is then moved to the DLQ by the queue's redrive policy (after
``maxReceiveCount`` receives), it arrives with the producer's envelope. SQS marks every message its
redrive policy moves with the system attribute :data:`MOVED_BY_SQS_ATTRIBUTE`, so such a message has
no envelope of the consumer's, whatever it carries (:func:`envelope_of` with its system attributes):
the CLI lists it as moved after too many receives, never with the reason it claims.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The reason: a machine-readable code, a human-readable message, the id of the message that failed.
REASON_ATTRIBUTES = ("error_code", "error_message", "source_message_id")
#: The longest ``error_message`` a parked message carries (characters; a longer reason is cut).
MAX_ERROR_MESSAGE_CHARS = 1024
#: The consumer's mark on a message it parked: a JSON envelope (see the module docstring).
PARKED_ATTRIBUTE = "order_pipeline_parked"
#: The envelope's version; an envelope of another version is not ours (treated as a producer's value).
ENVELOPE_VERSION = 1
#: The system attribute SQS adds to each message its redrive policy moves into a dead-letter queue
#: (the source queue's ARN); the consumer's own SendMessage never carries it.
MOVED_BY_SQS_ATTRIBUTE = "DeadLetterQueueSourceArn"
#: Every attribute the consumer adds when it parks (an original of one of these names is packed).
ADDED_ATTRIBUTES = (PARKED_ATTRIBUTE, *REASON_ATTRIBUTES)
# The keys of an attribute in the Lambda event shape, as packed.
_PACKED_VALUE_KEYS = frozenset({"dataType", "stringValue", "binaryValue", "stringListValues", "binaryListValues"})


@dataclass(frozen=True)
class Envelope:
    """What the consumer added to a parked message, and the original attributes it packed."""

    added: tuple[str, ...] = ADDED_ATTRIBUTES
    #: Original attributes in the Lambda event shape (``dataType``, ``stringValue``/``binaryValue``).
    packed: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self, *, with_packed: bool) -> str:
        content: dict[str, Any] = {"version": ENVELOPE_VERSION, "added": list(self.added)}
        if with_packed:
            content["packed"] = self.packed
        return json.dumps(content, separators=(",", ":"), sort_keys=True, default=str)

    @classmethod
    def read(cls, value: object) -> Envelope | None:
        """The envelope in an attribute's string value; None unless it is exactly one of this version."""
        if not isinstance(value, str) or not value.startswith("{"):
            return None
        try:
            content = json.loads(value)
        except ValueError:
            return None
        if not isinstance(content, dict) or set(content) - {"version", "added", "packed"}:
            return None
        version, added, packed = content.get("version"), content.get("added"), content.get("packed", {})
        if type(version) is not int or version != ENVELOPE_VERSION:
            return None
        if not isinstance(added, list) or not set(added) <= set(ADDED_ATTRIBUTES) or PARKED_ATTRIBUTE not in added:
            return None
        if not isinstance(packed, dict) or not all(_is_packed_value(v) for v in packed.values()):
            return None
        return cls(added=tuple(added), packed={str(name): dict(v) for name, v in packed.items()})


def _is_packed_value(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("dataType"), str)
        and set(value) <= _PACKED_VALUE_KEYS
        and all(isinstance(value.get(key, ""), str) for key in ("stringValue", "binaryValue"))
    )


def envelope_of(
    attributes: Mapping[str, Mapping[str, Any]],
    *,
    string_key: str,
    system_attributes: Mapping[str, Any] | None = None,
) -> Envelope | None:
    """The consumer's envelope on a message, or None if it carries none (not parked by the consumer).

    ``string_key`` is where an attribute keeps its string: ``stringValue`` in a Lambda event,
    ``StringValue`` in a ReceiveMessage answer. ``system_attributes``, given for a message received
    from the DLQ: one SQS moved there (:data:`MOVED_BY_SQS_ATTRIBUTE`) has no envelope of the
    consumer's, whatever it carries (see the module docstring).
    """
    if system_attributes is not None and MOVED_BY_SQS_ATTRIBUTE in system_attributes:
        return None
    marker = attributes.get(PARKED_ATTRIBUTE)
    return Envelope.read(marker.get(string_key)) if isinstance(marker, Mapping) else None


def unparked(attributes: Mapping[str, Mapping[str, Any]], envelope: Envelope | None) -> dict[str, dict[str, Any]]:
    """The attributes without what the envelope says the consumer added; the packed ones not unpacked.

    With no envelope every attribute is the producer's and all are returned.
    """
    if envelope is None:
        return {name: dict(value) for name, value in attributes.items()}
    return {name: dict(value) for name, value in attributes.items() if name not in envelope.added}


def producer_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """A Lambda event record's attributes as the producer sent them: what the consumer's envelope says it
    added removed, and what it packed unpacked (packed values win: they are the originals).

    The one reading of a parked message's attributes for the consumer: a message a move task brought
    back from the DLQ as it is keeps its packed ``idempotency_key``, and parking it again packs the
    originals, never the earlier reason. A message without the envelope is returned unchanged.
    """
    envelope = envelope_of(attributes, string_key="stringValue")
    originals = unparked(attributes, envelope)
    if envelope is not None:
        originals.update(envelope.packed)
    return originals
