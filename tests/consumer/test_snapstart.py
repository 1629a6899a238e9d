"""SnapStart: the after-restore hook gives each restored environment its own clients and random seed,
and the hook is registered only when Lambda prepares a snapshot."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer import runtime, snapstart
from tests.consumer.harness import World, sqs_record


def test_after_restore_makes_new_clients_and_the_next_invocation_runs_on_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a warm environment as a snapshot holds it: clients made at import, a pipeline built by an invocation
    monkeypatch.setattr(runtime, "_init_clients", runtime.Clients.from_default_session())
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    handler_module.configure()
    assert world.invoke([sqs_record({"order_id": "o-before", "event_id": "evt-before"})]) == {"batchItemFailures": []}
    snapshot_clients, snapshot_pipeline = runtime.default_clients(), handler_module._pipeline
    assert snapshot_pipeline is not None
    random_state = random.getstate()
    # WHEN Lambda restores the snapshot and runs the hook
    snapstart.after_restore()
    # THEN the pipeline is dropped, the clients are new, the random state is reseeded
    assert handler_module._pipeline is None
    restored = runtime.default_clients()
    assert restored is not snapshot_clients
    assert restored.dynamodb is not snapshot_clients.dynamodb
    assert restored.sns is not snapshot_clients.sns
    assert random.getstate() != random_state
    # AND the next invocation builds a new pipeline on the new clients and records its order
    assert world.invoke([sqs_record({"order_id": "o-after", "event_id": "evt-after"})]) == {"batchItemFailures": []}
    assert handler_module._pipeline is not None
    assert handler_module._pipeline is not snapshot_pipeline
    item = world.dynamodb.get_item(TableName=world.events_table, Key={"event_id": {"S": "evt-after"}})["Item"]
    assert item["status"] == {"S": "sent"}


def _fake_hook_library(monkeypatch: pytest.MonkeyPatch) -> list[Callable[[], None]]:
    registered: list[Callable[[], None]] = []
    library = types.ModuleType("snapshot_restore_py")
    library.register_after_restore = registered.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", library)
    return registered


def test_the_hook_is_registered_when_lambda_prepares_a_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN Lambda's hook library and an init phase that ends in a snapshot
    registered = _fake_hook_library(monkeypatch)
    # WHEN the handler module registers its hooks
    done = snapstart.register({"AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"})
    # THEN after_restore is registered, once
    assert done is True
    assert registered == [snapstart.after_restore]


@pytest.mark.parametrize("initialization_type", [None, "on-demand", "provisioned-concurrency"])
def test_without_snapstart_nothing_is_registered_or_imported(
    monkeypatch: pytest.MonkeyPatch, initialization_type: str | None
) -> None:
    # GIVEN an ordinary init phase (or none: outside Lambda), and no hook library installed
    monkeypatch.delitem(sys.modules, "snapshot_restore_py", raising=False)
    env = {} if initialization_type is None else {"AWS_LAMBDA_INITIALIZATION_TYPE": initialization_type}
    # WHEN the handler module registers its hooks
    done = snapstart.register(env)
    # THEN nothing is registered and the library is not even imported
    assert done is False
    assert "snapshot_restore_py" not in sys.modules


def test_the_handler_and_the_runtime_register_their_resets() -> None:
    # GIVEN the imported handler (it imports the runtime)
    # WHEN the resets after_restore runs are listed
    names = {reset.__qualname__ for reset in snapstart._resets}
    # THEN the clients and the pipeline are among them
    assert {"_new_clients_after_restore", "_drop_pipeline_after_restore"} <= names
