"""The consumer's botocore data loader gives botocore the very data its own loader gives.

The consumer's loader parses botocore's data files into plain dicts instead of ``OrderedDict``
(``runtime._PlainJSONFileLoader``: about half the parse time of a cold start's first clients).
Here every data file the consumer's three clients load, made and calling as in Lambda, is loaded
again with botocore's own loader and compared key by key, in order. ``make test-runtime`` runs this
module on python3.14 too, with that venv's botocore.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections import OrderedDict
from typing import Any

import botocore.loaders
import botocore.session

from idempotent_order_pipeline._lambda_asset.order_consumer import runtime

#: One call per service, stopped before it is sent: the data a first call loads is loaded too.
_CALLS = {"dynamodb": ("list_tables", {}), "sns": ("list_topics", {}), "sqs": ("list_queues", {})}


class _Stopped(Exception):
    """Raised in place of sending the request."""


class _Recording(runtime._ServicesLoader):
    """The consumer's loader, noting the name of every data file botocore asks it for."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def load_data_with_path(self, name: str) -> Any:
        self.names.append(name)
        return super().load_data_with_path(name)


def _in_order(data: Any) -> str:
    """The data as text, keys in the order the parse kept them (so order differences show)."""
    return json.dumps(data, sort_keys=False)


def _nested_types(data: Any) -> set[type]:
    if isinstance(data, dict):
        return {type(data)} | {kind for value in data.values() for kind in _nested_types(value)}
    if isinstance(data, list):
        return {kind for value in data for kind in _nested_types(value)}
    return set()


def test_every_data_file_the_consumers_clients_load_parses_as_with_botocores_own_loader() -> None:
    # GIVEN the consumer's session, its loader recording what botocore asks for
    recording = _Recording()
    session = botocore.session.get_session()
    session.register_component("data_loader", recording)
    # WHEN the consumer's three clients are made (as in Lambda) and each makes its first call
    for service, (operation, parameters) in _CALLS.items():
        client = session.create_client(
            service,
            region_name="eu-west-1",
            config=runtime.CLIENT_CONFIG,
            aws_access_key_id="AKID",
            aws_secret_access_key="secret",
        )

        def stop(**_: Any) -> None:
            raise _Stopped

        client.meta.events.register("before-send", stop)
        with contextlib.suppress(_Stopped):
            getattr(client, operation)(**parameters)
    # THEN it asked for the endpoint data and each service's model and rules, at least
    names = set(recording.names)
    assert {"endpoints", "partitions", "sdk-default-configuration"} <= names
    assert {name.split("/")[0] for name in names if name.endswith("/service-2")} == set(runtime.SERVICES)
    # AND every file parses to the same data, key for key and in the same order, as botocore's own
    # loader parses it
    # (fresh loaders: botocore edits some of what it loaded, in place, as it uses it)
    botocore_loader, consumer_loader = botocore.loaders.Loader(), runtime._ServicesLoader()
    for name in sorted(names):
        try:
            expected = botocore_loader.load_data(name)
        except botocore.exceptions.DataNotFoundError:
            continue  # an optional file (the .sdk-extras): both loaders found none
        found = consumer_loader.load_data(name)
        assert _in_order(found) == _in_order(expected), name
        # (and the consumer's copy really is the plain-dict parse)
        assert OrderedDict not in _nested_types(found), name


def test_a_file_the_loader_cannot_find_is_none_as_for_botocore(tmp_path: Any) -> None:
    # GIVEN the consumer's file loader and botocore's
    ours, theirs = runtime._PlainJSONFileLoader(), botocore.loaders.JSONFileLoader()
    # WHEN each looks for a file that is not there, and for one in each format
    (tmp_path / "plain.json").write_text('{"b": 1, "a": [{"d": 2, "c": 3}]}')
    with gzip.open(tmp_path / "zipped.json.gz", "wb") as fp:
        fp.write(b'{"z": 1, "y": 2}')
    # THEN they agree: nothing, then the same data in the same order
    assert ours.load_file(str(tmp_path / "missing")) is None
    assert theirs.load_file(str(tmp_path / "missing")) is None
    for stem in ("plain", "zipped"):
        assert _in_order(ours.load_file(str(tmp_path / stem))) == _in_order(theirs.load_file(str(tmp_path / stem)))
    assert ours.exists(str(tmp_path / "plain")) is True
