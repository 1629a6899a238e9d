"""Wiring: AWS clients and the pipeline built from the settings (the composition root).

The DynamoDB and SNS clients are created at import, in Lambda's init phase (outside the first
invocation's timeout), the SQS client only when a record is parked. What a cold start spends, step
by step (``python -X importtime`` and ``bench/coldstart.py``, CPU on the development machine under
load): botocore's import about 125 ms, the two clients about 42 ms (60 with botocore's default loader)
before the loader parsed into plain dicts (:class:`_PlainJSONFileLoader`: the handler's import then
took 60 ms less CPU, 302 against 361 ms at best of 15 fresh interpreters each, interleaved),
this package about 25 ms; boto3 would add s3transfer's import, and the negated character class
that :mod:`order_consumer.contract.batching` writes as its complement 4-15 ms. With
SnapStart the init phase runs once per version (:mod:`order_consumer.snapstart`).

Settings are still read at the first invocation, so a missing
variable fails that invocation with a message naming it, never the import; a client that cannot be
made at import (no region outside Lambda) is made, or fails with its reason, at the first invocation.

Client settings, each measured with ``tests/consumer/client_tuning.py`` (CPU per call against a
stand-in over real HTTP): standard retries, TCP keepalive and a pool of 12 connections cost the
same CPU as their alternatives within noise (about 1.55-1.61 ms per call) and are kept for their
behaviour; turning parameter validation off would save 0.03 ms per transaction and 0.07 ms per
PublishBatch of 10 (about 1 % of a record's CPU), which does not pay for losing the client-side
check of every request the tests make, so it stays on.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import botocore.loaders
import botocore.session
from botocore.config import Config

from .config import Settings
from .contract.order_schema import load_order_schema
from .dead_letter import DeadLetterQueue
from .notifier import Notifier
from .pipeline import (
    DEFAULT_MAX_WORKERS,
    DEFAULT_MIN_REMAINING_MS,
    DEFAULT_RETURN_MARGIN_MS,
    OrderPipeline,
)
from .snapstart import on_restore
from .store import OrderStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient

# Every AWS call is bounded, and the bound fits in the time a record is allowed (from its latest
# start, DEFAULT_MIN_REMAINING_MS before the deadline, to the batch's return, DEFAULT_RETURN_MARGIN_MS
# before it): each attempt may take CONNECT_TIMEOUT_S + READ_TIMEOUT_S, and standard retry mode
# makes at most MAX_ATTEMPTS attempts with one backoff of at most BACKOFF_BOUND_S between them. A
# read timeout restarts with every byte received, so the batch's own waits bound a trickling answer.
CONNECT_TIMEOUT_S = 0.25
READ_TIMEOUT_S = 0.5
MAX_ATTEMPTS = 2
#: Standard mode's backoff before the first retry: rand(0, 1) x 1 s after a throttle, x 50 ms otherwise.
BACKOFF_BOUND_S = 1.0
#: The worst-case duration of one call (without an ``x-amz-retry-after`` header).
CALL_BOUND_S = MAX_ATTEMPTS * (CONNECT_TIMEOUT_S + READ_TIMEOUT_S) + BACKOFF_BOUND_S
#: The time a record is allowed: from its latest start to the batch's return.
RECORD_ALLOWANCE_S = (DEFAULT_MIN_REMAINING_MS - DEFAULT_RETURN_MARGIN_MS) / 1000

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
    connect_timeout=CONNECT_TIMEOUT_S,
    read_timeout=READ_TIMEOUT_S,
    # A connection per worker thread, plus the stage-2 calls that overlap the last transactions.
    max_pool_connections=DEFAULT_MAX_WORKERS + 2,
    tcp_keepalive=True,
)


#: The services the consumer calls (the only ones its session's loader knows of).
SERVICES = ("dynamodb", "sns", "sqs")


class _PlainJSONFileLoader(botocore.loaders.JSONFileLoader):
    """botocore's JSON file loader, parsing into plain dicts instead of ``OrderedDict``.

    botocore parses its data files with ``object_pairs_hook=OrderedDict``, which takes twice the
    time of plain dicts: of a cold start's first clients, ``endpoints.json`` (1.25 MB) 38 ms of CPU
    against 17, the DynamoDB model 7 against 4 (best of 20 parses). A dict keeps its keys in the order parsed, as the
    ``OrderedDict`` did, and botocore never asks for more (no ``isinstance`` check, no
    ``move_to_end``); ``tests/consumer/test_data_loader.py`` checks that every file the consumer's
    clients load parses to the same data in the same order. Same files, same order of formats as
    botocore (``.json``, then ``.json.gz``), through the public ``load_file`` only: a botocore that
    Lambda updates keeps working with it.
    """

    def load_file(self, file_path: str) -> Any:
        for suffix, opener in ((".json", open), (".json.gz", gzip.open)):
            full_path = file_path + suffix
            if os.path.isfile(full_path):
                with opener(full_path, "rb") as fp:
                    return json.loads(fp.read().decode("utf-8"))
        return None


class _ServicesLoader(botocore.loaders.Loader):
    """botocore's data loader, told which services exist instead of listing them, parsing into
    plain dicts (:class:`_PlainJSONFileLoader`).

    A client's first model load lists every service botocore ships (over 400 directories, a
    ``listdir`` and ``stat`` each, once for the service models and once for the endpoint rules):
    about 18 ms of a cold start's CPU, measured with ``bench/coldstart.py``, for an answer the
    consumer knows. Models, versions and endpoint rules still come from botocore's own files.
    """

    FILE_LOADER_CLASS = _PlainJSONFileLoader

    def list_available_services(self, type_name: str) -> list[str]:
        return list(SERVICES)


#: One loader for every session: it keeps the models it loaded, so clients made again after a
#: SnapStart restore (:func:`_new_clients_after_restore`) do not parse them again.
_loader = _ServicesLoader()


def _session() -> botocore.session.Session:
    """A new botocore session (credentials and Region from the environment) with the shared loader.

    botocore without boto3: boto3's import adds s3transfer and its session, which the consumer
    never uses.
    """
    session = botocore.session.get_session()
    session.register_component("data_loader", _loader)
    return session


@dataclass(frozen=True)
class Clients:
    """The AWS clients the consumer calls; ``sqs`` None means "create it at the first park"."""

    dynamodb: DynamoDBClient
    sns: SNSClient
    sqs: SQSClient | None = None

    @classmethod
    def from_default_session(cls) -> Clients:
        """New DynamoDB and SNS clients from a new botocore session (credentials and Region from the
        environment; ``moto.mock_aws()`` started earlier reaches them); the SQS client is left to the
        first park."""
        session = _session()
        return cls(
            dynamodb=cast("DynamoDBClient", session.create_client("dynamodb", config=CLIENT_CONFIG)),
            sns=cast("SNSClient", session.create_client("sns", config=CLIENT_CONFIG)),
        )


def sqs_client() -> SQSClient:
    """A new SQS client with the consumer's configuration."""
    return cast("SQSClient", _session().create_client("sqs", config=CLIENT_CONFIG))


_init_lock = threading.Lock()
_init_clients: Clients | None = None


def _create_at_import() -> None:
    """Create the default clients now if the environment allows it (in Lambda it always does)."""
    global _init_clients
    try:
        _init_clients = Clients.from_default_session()
    except Exception:  # e.g. no region outside Lambda: the first invocation tries again and says why
        _init_clients = None


@on_restore
def _new_clients_after_restore() -> None:
    """SnapStart: the clients in the snapshot hold dead connections; make new ones (or at first use)."""
    global _init_clients
    with _init_lock:
        _create_at_import()


def default_clients() -> Clients:
    """The clients made at import, or (if that was not possible) new ones, which raise if they cannot be made."""
    global _init_clients
    with _init_lock:
        if _init_clients is None:
            _init_clients = Clients.from_default_session()
        return _init_clients


def build_pipeline(settings: Settings, clients: Clients) -> OrderPipeline:
    """The pipeline for these settings and clients."""
    sqs = clients.sqs
    return OrderPipeline(
        store=OrderStore(
            client=clients.dynamodb,
            processed_events_table=settings.processed_events_table,
            order_records_table=settings.order_records_table,
            record_ttl_seconds=settings.record_ttl_seconds,
        ),
        notifier=Notifier(client=clients.sns, topic_arn=settings.topic_arn),
        dead_letters=DeadLetterQueue(
            queue_url=settings.dead_letter_queue_url,
            client=sqs,
            client_factory=None if sqs is not None else sqs_client,
        ),
        identity_fields=settings.identity_fields,
        notification_format=settings.notification_format,
        # The validator the construct generated into this asset (none without an order_schema).
        order_schema=load_order_schema(__package__ or "order_consumer"),
    )


_create_at_import()
