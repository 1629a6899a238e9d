"""A frozen release's Lambda code serving invocations in a child process (never imported by a test).

Run as ``python -I released_worker.py ROOT`` with ``AWS_ENDPOINT_URL`` set to the test process's moto
server; the first stdin line is the functions' environment (JSON), each further line one request
``{"entry": "handler" | "reconciler" | "configure", "event": {...}}`` (``configure``: the event is a new
environment). Each answer is one stdout line starting with
:data:`ANSWER`: the entry point's return value, or ``{"error": ...}`` when it raised (the invocation
failed, as Lambda would report it). Powertools' logs and metrics go to stdout too, unmarked.

The release's own ``configure`` seams are used with clients whose timeouts suit an emulator on a
loaded machine (the released clients give up after 0.5 s): what is compared is what the code does
with the tables and messages, not how it waits.
"""

from __future__ import annotations

import json
import sys
import traceback

ANSWER = "@@released-answer "


class Context:
    function_name = "order-consumer"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:order-consumer"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    import boto3
    from botocore.config import Config
    from order_consumer import handler as consumer
    from order_consumer.runtime import Clients

    config = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=10, read_timeout=60)
    dynamodb, sns, sqs = (boto3.client(name, config=config) for name in ("dynamodb", "sns", "sqs"))
    try:
        from order_consumer import reconciler
    except ImportError:  # 0.1.0 had none
        reconciler = None

    def configure(environ: dict[str, str], _context: object = None) -> dict[str, bool]:
        consumer.configure(Clients(dynamodb=dynamodb, sns=sns, sqs=sqs), environ)
        if reconciler is not None:
            reconciler.configure(reconciler.ReconcilerClients(dynamodb=dynamodb, sns=sns), environ)
        return {"ready": True}

    entries = {"handler": consumer.handler, "configure": configure}
    if reconciler is not None:
        entries["reconciler"] = reconciler.handler
    print(ANSWER + json.dumps(configure(json.loads(sys.stdin.readline()))), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = entries[request["entry"]](request["event"], Context())
        except Exception as exc:  # the invocation failed: Lambda reports it, SQS redelivers
            answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        print(ANSWER + json.dumps(answer, default=str), flush=True)


if __name__ == "__main__":
    main()
