"""The parked-message contract: what the consumer adds to a message it sends to the DLQ.

Shared by the consumer (which parks) and the operator CLI (which lists, drops and redrives), so the
two can never disagree on the attribute names.
"""

from __future__ import annotations

#: SQS allows 10 message attributes per message; three of them carry the reason.
MAX_MESSAGE_ATTRIBUTES = 10
#: The reason: a machine-readable code, a human-readable message, the id of the message that failed.
REASON_ATTRIBUTES = ("error_code", "error_message", "source_message_id")
#: Original attributes that do not fit beside the reason travel as one JSON attribute of this name.
ORIGINAL_ATTRIBUTES = "original_attributes"
