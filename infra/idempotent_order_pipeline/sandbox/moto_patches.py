"""The sandbox's fixes for moto 5.2.5: DynamoDB transactions, and stack outputs after a change set.

1. ``TransactWriteItems``: snapshot items, not tables.

moto 5.2.5 (``moto/dynamodb/models/__init__.py``, ``DynamoDBBackend.transact_write_items``)
deep-copies every table a transaction names before it starts and, when the transaction is
cancelled, puts the copies back in place of the live tables. That makes each transaction cost
O(table size) (measured: 1,000 transactions took 18 s on empty tables and 101 s once they held 2,000
items), and the restore swaps whole table objects, silently undoing any write that another request
made in between.

:func:`apply` replaces that method with one that behaves the same for the caller (same validation,
same cancellation reasons, ``ALL_OLD`` items included) but journals only the items the transaction
touches: before each write it deep-copies that one item (or notes its absence), and on cancellation
it puts every touched item back as it was, in reverse order. All or nothing, as before, at
O(items in the transaction). One deliberate difference: moto applied the earlier items of a
transaction whose later item names two operations (``TransactWriteSingleOpException``) and did not
roll them back; here they are rolled back too.

This does not make moto thread-safe: a transaction's writes and its rollback are still separate
steps. Serialize requests into moto (the sandbox server does, see :mod:`.server`).

2. Stack outputs of a stack created by a change set (what ``cdk deploy`` does by default): moto
creates the stack with an empty template when the change set is created and, when it is executed,
updates the resources but never re-reads the outputs, so ``DescribeStacks`` returns none. After a
change set is applied, :func:`apply` re-parses the stack's template and rebuilds its outputs.

3. ``Fn::GetAtt`` of a resource moto's CloudFormation skipped (a type it does not implement, such
as ``AWS::CloudWatch::Alarm``) fails the whole stack ("references undefined resource"); the
construct's dashboard names its alarms that way. With the fix such a reference resolves to a
placeholder ARN (``arn:aws:cloudformation:<region>:<account>:sandbox-skipped/<id>/<attribute>``)
and the resource stays skipped: the sandbox lists every skipped resource in its report.

4. SQS's clock: moto's SQS asks ``moto.core.utils.unix_time`` for the time several times per message
on every receive and every ``GetQueueAttributes`` (is it visible? delayed?), and that function builds
two datetimes per call: a receive on a queue of 500 messages took about 80 ms of CPU. With the fix,
``moto.sqs.models`` reads ``time.time()`` instead when no datetime is given (the same clock, and
freezegun still freezes it), about ten times cheaper.

5. The public Powertools parameter: the construct reads its layer ARN at deploy from AWS's public
SSM parameter ``/aws/service/powertools/python/...`` (a stack parameter of type
``AWS::SSM::Parameter::Value<String>``, which moto's CloudFormation resolves from its SSM backend,
``moto/cloudformation/parsing.py``, ``load_parameters``). In AWS only AWS writes under ``/aws``,
and moto refuses ``PutParameter`` there (``AccessDeniedException``: reserved name), so nothing
could provide it. With the fix, names under :data:`SEEDABLE_PARAMETER_PREFIX` only are accepted
(the same validation and versioning, through moto's own method under a stand-in name), so the
sandbox publishes its local layer's ARN there before ``cdk deploy``, as Powertools does in AWS.

6. CloudFormation for real apps (change sets per stack, rollback of a failed deploy, exports and
imports, FIFO names, ``AWS::SNS::Subscription``, unsupported types refused, event source mappings
deleted with their stack): :mod:`.moto_cloudformation`, installed by :func:`apply` too.

7. PartiQL ``UPDATE`` statements in ``BatchExecuteStatement`` (the consumer's and the reconciler's
``sent`` marks). moto 5.2.5 (``DynamoDBBackend.batch_execute_statement`` -> ``execute_statement`` ->
``py_partiql_parser``) gets four things wrong for them: an ``UPDATE`` whose ``WHERE`` matches no item
answers as if it had succeeded (DynamoDB answers that statement with the error code
``ConditionalCheckFailed``, ``BatchStatementError``); the statement's
``ReturnValuesOnConditionCheckFailure=ALL_OLD`` is ignored (DynamoDB puts the item in the error);
``UPDATE ... REMOVE attr`` fails the parser's assertion and the whole call with it; and every
statement copies every item of every table into JSON first (O(all items) per statement). With the
fix, an ``UPDATE`` of the form ``UPDATE "table" SET a = ?, b = 'x' [REMOVE c] WHERE key = ? [AND attr
= ? ...]`` (quoted or bare top-level names, ``?`` parameters or string and number literals, ``AND`` of
equalities that name the table's key) runs as moto's own ``update_item`` on that one item: the
key's equalities give the key, the others and ``attribute_exists(key)`` (an ``UPDATE`` never creates
an item) the condition, the ``SET`` and ``REMOVE`` clauses the update expression; a failed condition
becomes that statement's ``ConditionalCheckFailed`` (with the item under ``ALL_OLD``), any other
moto error that statement's error, and the other statements run on. Statements of any other form
go to moto's own code, one by one. Written up for upstream in ``docs/sandbox.md``.

Apply the fixes only in the sandbox and in test set-ups (``apply()`` before ``mock_aws()`` or
before the server starts); :func:`revert` restores moto's methods.
"""

from __future__ import annotations

import copy
import datetime
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import moto
from moto.cloudformation import parsing as cloudformation_parsing
from moto.cloudformation.models import ChangeSet
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.sqs import models as sqs_models
from moto.ssm.models import SimpleSystemManagerBackend

from idempotent_order_pipeline.sandbox import moto_cloudformation, moto_stack_resources
from idempotent_order_pipeline.sandbox.partiql import NotTheSubset, parse_partiql_update

#: The moto version whose ``transact_write_items`` this module re-implements. Another version may
#: have changed the method; re-read it before widening this.
PATCHED_MOTO_VERSION = "5.2.5"
#: DynamoDB's limit on items per transaction (moto enforces it too).
MAX_TRANSACTION_ITEMS = 100

_ORIGINAL_TRANSACT = DynamoDBBackend.transact_write_items
_ORIGINAL_BATCH_EXECUTE = DynamoDBBackend.batch_execute_statement
_ORIGINAL_APPLY_CHANGE_SET = ChangeSet.apply
_ORIGINAL_CLEAN_JSON = cloudformation_parsing.clean_json
_ORIGINAL_PUT_PARAMETER = SimpleSystemManagerBackend.put_parameter
#: The one public (AWS-owned) parameter path the sandbox may write: Powertools' layer ARNs.
SEEDABLE_PARAMETER_PREFIX = "/aws/service/powertools/"
# moto stores the parameter under this name while its own put_parameter runs (not reserved).
_STAND_IN_PREFIX = "/sandbox-seeded"
# moto.sqs.models imports these two from moto.core.utils (not re-exported, hence vars()).
_ORIGINAL_SQS_UNIX_TIME = vars(sqs_models)["unix_time"]
_ORIGINAL_SQS_UNIX_TIME_MILLIS = vars(sqs_models)["unix_time_millis"]
_lock = threading.Lock()


@dataclass
class _Snapshot:
    """One touched item as it was before the transaction wrote it (``item`` None: it did not exist)."""

    table: Table
    hash_key: DynamoType
    range_key: DynamoType | None
    item: Item | None
    stream_length: int | None


@dataclass
class ItemJournal:
    """The items a transaction touched, to put back if it is cancelled."""

    snapshots: list[_Snapshot] = field(default_factory=list)

    def remember(self, table: Table, hash_key: DynamoType, range_key: DynamoType | None) -> None:
        """Copy the one item at this key (not the table) before the transaction writes it."""
        current = table.get_item(hash_key, range_key)
        shard = table.stream_shard
        self.snapshots.append(
            _Snapshot(
                table=table,
                hash_key=hash_key,
                range_key=range_key,
                # Updates mutate the live Item in place, so keep a copy, not a reference.
                item=copy.deepcopy(current),
                stream_length=None if shard is None else len(shard.items),
            )
        )

    def restore(self) -> None:
        """Put every touched item back as it was, last touched first."""
        for snapshot in reversed(self.snapshots):
            items: dict[Any, Any] = snapshot.table.items  # {hash: Item} or {hash: {range: Item}}
            if snapshot.range_key is None:
                if snapshot.item is None:
                    items.pop(snapshot.hash_key, None)
                else:
                    items[snapshot.hash_key] = snapshot.item
            else:
                bucket = items[snapshot.hash_key]
                if snapshot.item is None:
                    bucket.pop(snapshot.range_key, None)
                    if not bucket:  # an empty partition reads like a missing one; moto's reads leave them too
                        del items[snapshot.hash_key]
                else:
                    bucket[snapshot.range_key] = snapshot.item
            # Best effort, as moto's table copy did: drop the stream records of the undone writes.
            shard = snapshot.table.stream_shard
            if shard is not None and snapshot.stream_length is not None and len(shard.items) >= snapshot.stream_length:
                del shard.items[snapshot.stream_length :]
        self.snapshots.clear()


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto's ``transact_write_items`` with an item journal instead of table copies (see module doc)."""
    if len(transact_items) > MAX_TRANSACTION_ITEMS:
        raise TooManyTransactionsException()
    journal = ItemJournal()
    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        target = (str(table_name), str(dict(sorted(key.items()))))
        if target in target_items:
            raise MultipleTransactionsException()
        target_items.add(target)

    # One (code, message, ALL_OLD item) per transaction item; (None, None, None) when it passed.
    errors: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(item) > 1:
            journal.restore()
            raise TransactWriteSingleOpException()
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")

            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            expression_attribute_names = op.get("ExpressionAttributeNames")
            expression_attribute_values = op.get("ExpressionAttributeValues")
            return_values_on_condition_check_failure = op.get("ReturnValuesOnConditionCheckFailure")

            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]

            check_unicity(table_name, key)

            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(
                    condition_expression, expression_attribute_names, expression_attribute_values
                )
                if not condition_op.expr(current):
                    if return_values_on_condition_check_failure == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            if op_type != "ConditionCheck":
                table = self.get_table(table_name)
                journal.remember(table, *self.get_keys_value(table, key))
            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    condition_expression=condition_expression,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            journal.restore()
            raise
        except ConditionalCheckFailed as exc:
            errors.append(("ConditionalCheckFailed", str(exc.message), original_item))
        except Exception as exc:  # moto reports any other failure as that item's cancellation reason
            errors.append((type(exc).__name__, str(exc), original_item))

    if any(code is not None for code, _, _ in errors):
        journal.restore()
        raise TransactionCanceledException(errors)


# --- 7. PartiQL UPDATE statements in BatchExecuteStatement -------------------------------------------


def _statement_error(code: str, message: str, item: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"Code": code, "Message": message}
    if item:
        error["Item"] = item
    return {"Error": error}


def batch_execute_statement(self: DynamoDBBackend, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """moto's ``batch_execute_statement``, with UPDATE statements of the subset run as ``update_item`` (point 7)."""
    responses: list[dict[str, Any]] = []
    for statement in statements:
        try:
            update = parse_partiql_update(statement["Statement"], list(statement.get("Parameters", [])))
        except NotTheSubset:
            responses.extend(_ORIGINAL_BATCH_EXECUTE(self, [statement]))
            continue
        if update.table not in self.tables:
            responses.append(_statement_error("ResourceNotFound", "Requested resource not found"))
            continue
        table = self.tables[update.table]
        try:
            request = update.request(table.hash_key_attr, table.range_key_attr)
        except NotTheSubset as exc:
            responses.append(
                _statement_error(
                    "ValidationError",
                    f"Where clause does not contain a mandatory equality on all key attributes: {exc}",
                )
            )
            continue
        wanted = statement.get("ReturnValuesOnConditionCheckFailure")
        try:
            self.update_item(**request, return_values_on_condition_check_failure=wanted)
        except ConditionalCheckFailed as exc:
            old = None
            if wanted == "ALL_OLD":
                current = table.get_item(
                    DynamoType(request["key"][table.hash_key_attr]),
                    DynamoType(request["key"][table.range_key_attr]) if table.range_key_attr else None,
                )
                old = None if current is None else current.to_json()["Attributes"]
            responses.append(_statement_error("ConditionalCheckFailed", str(exc.message), old))
            continue
        except MockValidationException as exc:
            responses.append(_statement_error("ValidationError", str(exc.message)))
            continue
        responses.append({"TableName": update.table})
    return responses


def apply_change_set(self: ChangeSet) -> None:
    """moto's ``ChangeSet.apply``, then the stack's template and outputs are those of the change set."""
    _ORIGINAL_APPLY_CHANGE_SET(self)
    stack = self.stack
    stack.template = self.template
    stack._parse_template()
    stack.output_map = stack._create_output_map()
    stack.description = stack.template_dict.get("Description")


def skipped_resource_placeholder(region: str, account: str, logical_id: str, attribute: str) -> str:
    """What ``Fn::GetAtt`` of a skipped resource resolves to: its physical id (see
    :func:`.moto_stack_resources.skipped_physical_id`) and the attribute."""
    return f"{moto_stack_resources.skipped_physical_id(region, account, logical_id)}/{attribute}"


def clean_json(resource_json: Any, resources_map: Any) -> Any:
    """moto's template evaluation, except that ``Fn::GetAtt`` of a skipped resource gives a placeholder."""
    if isinstance(resource_json, dict) and "Fn::GetAtt" in resource_json:
        target = resource_json["Fn::GetAtt"]
        logical_id, attribute = target.split(".", 1) if isinstance(target, str) else (target[0], target[1])
        declared = resources_map._resource_json_map.get(logical_id)
        if (
            isinstance(declared, dict)
            and cloudformation_parsing.resource_class_from_type(declared.get("Type", "")) is None
            and resources_map.get(logical_id) is None
        ):
            return skipped_resource_placeholder(
                resources_map._region_name, resources_map._account_id, logical_id, str(attribute)
            )
    return _ORIGINAL_CLEAN_JSON(resource_json, resources_map)


def sqs_unix_time(dt: datetime.datetime | None = None) -> float:
    """moto's ``unix_time``, reading ``time.time()`` directly for "now"."""
    return time.time() if dt is None else float(_ORIGINAL_SQS_UNIX_TIME(dt))


def sqs_unix_time_millis(dt: datetime.datetime | None = None) -> float:
    """moto's ``unix_time_millis``, reading ``time.time()`` directly for "now"."""
    return time.time() * 1000.0 if dt is None else float(_ORIGINAL_SQS_UNIX_TIME_MILLIS(dt))


def put_parameter(self: SimpleSystemManagerBackend, name: str, *args: Any, **kwargs: Any) -> Any:
    """moto's ``put_parameter``, also for names under :data:`SEEDABLE_PARAMETER_PREFIX`."""
    if not name.startswith(SEEDABLE_PARAMETER_PREFIX):
        return _ORIGINAL_PUT_PARAMETER(self, name, *args, **kwargs)
    stand_in = _STAND_IN_PREFIX + name
    parameters = self._parameters
    if name in parameters:  # earlier versions, so that Overwrite and the version number work
        parameters[stand_in] = dict.pop(parameters, name)
    try:
        return _ORIGINAL_PUT_PARAMETER(self, stand_in, *args, **kwargs)
    finally:
        versions = dict.pop(parameters, stand_in, [])
        for version in versions:
            version.name = name
        if versions:
            parameters[name] = versions


def apply() -> None:
    """Install the fixes (idempotent). Raises RuntimeError on a moto version it was not written for."""
    _check_version()
    with _lock:
        DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
        DynamoDBBackend.batch_execute_statement = batch_execute_statement  # type: ignore[method-assign]
        ChangeSet.apply = apply_change_set  # type: ignore[method-assign]
        cloudformation_parsing.clean_json = clean_json
        vars(sqs_models).update(unix_time=sqs_unix_time, unix_time_millis=sqs_unix_time_millis)
        SimpleSystemManagerBackend.put_parameter = put_parameter  # type: ignore[method-assign]
    moto_cloudformation.apply()


def apply_partiql_fix() -> None:
    """Install fix 7 alone (idempotent): what the test suite runs every moto-backed test with, since the
    functions' marks are PartiQL statements; :func:`revert_partiql_fix` removes it."""
    _check_version()
    with _lock:
        DynamoDBBackend.batch_execute_statement = batch_execute_statement  # type: ignore[method-assign]


def revert_partiql_fix() -> None:
    """moto's own ``batch_execute_statement`` again."""
    with _lock:
        DynamoDBBackend.batch_execute_statement = _ORIGINAL_BATCH_EXECUTE  # type: ignore[method-assign]


def _check_version() -> None:
    if moto.__version__ != PATCHED_MOTO_VERSION:
        raise RuntimeError(
            f"idempotent_order_pipeline.sandbox.moto_patches re-implements moto {PATCHED_MOTO_VERSION}'s "
            f"transact_write_items; moto {moto.__version__} is installed. Re-read "
            "moto/dynamodb/models/__init__.py and update the patch (or drop it if moto fixed it)."
        )


def revert() -> None:
    """Put moto's own methods back."""
    with _lock:
        DynamoDBBackend.transact_write_items = _ORIGINAL_TRANSACT  # type: ignore[method-assign]
        DynamoDBBackend.batch_execute_statement = _ORIGINAL_BATCH_EXECUTE  # type: ignore[method-assign]
        ChangeSet.apply = _ORIGINAL_APPLY_CHANGE_SET  # type: ignore[method-assign]
        cloudformation_parsing.clean_json = _ORIGINAL_CLEAN_JSON
        vars(sqs_models).update(unix_time=_ORIGINAL_SQS_UNIX_TIME, unix_time_millis=_ORIGINAL_SQS_UNIX_TIME_MILLIS)
        SimpleSystemManagerBackend.put_parameter = _ORIGINAL_PUT_PARAMETER  # type: ignore[method-assign]
    moto_cloudformation.revert()


def is_applied() -> bool:
    """Whether :func:`apply` is in effect."""
    return (
        DynamoDBBackend.transact_write_items is transact_write_items
        and DynamoDBBackend.batch_execute_statement is batch_execute_statement
        and ChangeSet.apply is apply_change_set
        and cloudformation_parsing.clean_json is clean_json
        and vars(sqs_models)["unix_time_millis"] is sqs_unix_time_millis
        and SimpleSystemManagerBackend.put_parameter is put_parameter
        and moto_cloudformation.is_applied()
    )
