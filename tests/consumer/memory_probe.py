"""Run in a fresh process: how much peak RSS the consumer's own work on one hostile body adds.

``python tests/consumer/memory_probe.py [NAME ...]`` warms up once (imports, botocore's DynamoDB
model, one small message), then for each body NAME (at most 256 KB, SQS's maximum) forks a child
of that warmed-up process, which builds the body, takes its peak RSS, parses and validates the body
as the handler does (``parse_order_message``) and, when it is valid, serializes the
TransactWriteItems call that would store it (sent to a stand-in transport, so no moto memory is
counted). One JSON line per body: its size, the outcome and the increase of peak RSS in bytes.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from collections.abc import Callable
from typing import Any

MAX_BODY = 256 * 1024


def _fill(prefix: str, unit: str, suffix: str) -> str:
    count = (MAX_BODY - len(prefix) - len(suffix)) // len(unit)
    return prefix + unit * count + suffix


def _distinct_numbers() -> str:
    parts, size, n = [], 40, 0
    while size < MAX_BODY - 20:
        text = str(n)
        parts.append(text)
        size += len(text) + 1
        n += 1
    return '{"order_id": "m", "x": [' + ",".join(parts) + "]}"


def _many_keys() -> str:
    parts, size, n = [], 40, 0
    while size < MAX_BODY - 20:
        part = f'"{n:x}":0'
        parts.append(part)
        size += len(part) + 1
        n += 1
    return '{"order_id": "m", "x": {' + ",".join(parts) + "}}"


BODIES: dict[str, Callable[[], str]] = {
    # [1e999999, ...] x 300, a 2.7 KB body; then the same filling 256 KB.
    "300-huge-exponents": lambda: '{"order_id": "m", "x": [' + ",".join(["1e999999"] * 300) + "]}",
    "huge-exponents": lambda: _fill('{"order_id": "m", "x": [', "1e999999,", "0]}"),
    "exponent-of-260k-digits": lambda: _fill('{"order_id": "m", "x": 1e', "9", "}"),
    "mantissa-of-260k-digits": lambda: _fill('{"order_id": "m", "x": 1.', "0", "1}"),
    "many-zeros": lambda: _fill('{"order_id": "m", "x": [', "0,", "0]}"),
    "many-distinct-numbers": _distinct_numbers,
    "many-largest-numbers": lambda: _fill('{"order_id": "m", "x": [', "1e125,", "0]}"),
    "many-smallest-numbers": lambda: _fill('{"order_id": "m", "x": [', "1e-130,", "0]}"),
    "many-empty-lists": lambda: _fill('{"order_id": "m", "x": [', "[],", "0]}"),
    "many-empty-maps": lambda: _fill('{"order_id": "m", "x": [', "{},", "0]}"),
    "many-keys": _many_keys,
    "many-lone-surrogates": lambda: _fill('{"order_id": "m", "x": "', "\\ud800", '"}'),
    "deep-nesting": lambda: _fill("", "[", "")[: MAX_BODY // 2] + "]" * (MAX_BODY // 2),
    "deep-nesting-unclosed": lambda: _fill('{"order_id": "m", "x": ', "[", ""),
    "huge-string": lambda: _fill('{"order_id": "m", "x": "', "x", '"}'),
}


def _transport(dynamodb: Any) -> None:
    """Answer every DynamoDB call with an empty success, after botocore serialized it (a
    ``BatchExecuteStatement`` with one empty response per statement, as DynamoDB answers one that succeeded)."""
    from botocore.awsrequest import AWSResponse

    class _Raw:
        def __init__(self, body: bytes) -> None:
            self._body = body

        def stream(self, **_: Any) -> Any:
            yield self._body

    def answer(request: Any, **_: Any) -> AWSResponse:
        body = b"{}"
        target = request.headers.get("X-Amz-Target", b"")
        if (target.decode() if isinstance(target, bytes) else target).endswith(".BatchExecuteStatement"):
            statements = json.loads(request.body)["Statements"]
            body = json.dumps({"Responses": [{} for _ in statements]}).encode()
        return AWSResponse(request.url, 200, {}, _Raw(body))

    dynamodb.meta.events.register("before-send.dynamodb", answer)


def main(names: list[str]) -> None:
    """Warm up once, then measure each body in a child forked from this warmed-up process."""
    import boto3

    from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import PermanentError
    from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_order_message

    dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
    _transport(dynamodb)

    def handle(body: str) -> str:
        try:
            message = parse_order_message(body)
        except PermanentError as exc:
            return exc.error_code
        dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": message.order_item}}])
        return "stored"

    handle('{"order_id": "warm-up", "x": [1, 1e5, "s", {"k": []}, {"n": [null, true]}]}')
    for name in names:
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: a copy of the warmed-up process that has seen no big body
            os.close(read)
            body = BODIES[name]()
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            outcome = handle(body)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            # ru_maxrss is in kilobytes on Linux.
            line = {
                "body": name,
                "bytes": len(body.encode("utf-8")),
                "outcome": outcome,
                "increase": (after - before) * 1024,
            }
            os.write(write, json.dumps(line).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            result = pipe.read()
        os.waitpid(child, 0)
        print(result.decode(), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(BODIES))
