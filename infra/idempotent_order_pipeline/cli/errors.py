"""Every error the operations raise on purpose, under one base class.

The commands turn each into a one-line message on stderr and exit code 1; the message says what
is wrong and what to do.
"""

from __future__ import annotations


class OperationsError(Exception):
    """Base class of the operator tooling's errors."""


class StackNotFoundError(OperationsError):
    """The named CloudFormation stack does not exist at this endpoint and region."""


class StackOutputMissingError(OperationsError):
    """The stack exists but lacks an output a command needs (not a pipeline stack, or not fully deployed)."""


class PipelineNotFoundError(OperationsError):
    """The stack holds no pipeline (or none that ``--pipeline`` names), or not one of its resources."""


class AmbiguousPipelineError(OperationsError):
    """The stack holds several pipelines and ``--pipeline`` does not pick exactly one."""


class MoveTaskUnsupportedError(OperationsError):
    """The endpoint does not implement SQS StartMessageMoveTask (moto and other emulators)."""


class CannotResendError(OperationsError):
    """A pending record's order cannot be rebuilt faithfully from its row, so it is not resent."""
