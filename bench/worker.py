"""One consumer in its own process, as one warm Lambda container: ``python -m bench.worker NAME``.

Started by :mod:`bench.capped`, which puts the process into its cgroup. The worker

1. pins itself to one core (``--cpu``) before it starts a thread;
2. moves its stdout (where handlers log, as in Lambda) to ``/dev/null`` and keeps the original
   stdout for its answers;
3. imports the consumer with the environment the parent gave it: the product's handler,
   ``order_consumer.handler.handler``, as a black box with its own environment variables and its
   own clients (botocore finds the stand-in through ``AWS_ENDPOINT_URL``); a peer of
   :mod:`bench.consumers` with clients from the same default session;
4. reads one JSON request per line on stdin and answers one JSON line per request:
   ``{"op": "batch", "event": {...}}`` runs the handler once and answers its wall time, the
   process's CPU time (every thread) and the number of failed records;
   ``{"op": "baseline"}`` leaves what was profiled so far out of the breakdown and
   ``{"op": "components"}`` answers the CPU seconds by component since then (``--profile`` only, see
   :mod:`bench.components`); ``{"op": "exit"}`` ends it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.lambda_context import Context

#: The module each consumer's handler lives in.
MODULES = {
    "naive": "bench.consumers.naive",
    "seed": "bench.consumers.seed",
    "powertools": "bench.consumers.powertools",
    "ours": "order_consumer.handler",
}
#: Environment variables of each peer (the product reads its own from os.environ).
PEER_VARIABLES = {
    "naive": ("ORDERS_TABLE", "TOPIC_ARN"),
    "seed": ("PROCESSED_EVENTS_TABLE", "ORDER_RECORDS_TABLE", "TOPIC_ARN"),
    "powertools": ("IDEMPOTENCY_TABLE", "ORDER_RECORDS_TABLE", "TOPIC_ARN"),
}


def load_handler(name: str) -> Callable[[dict[str, Any], Any], Any]:
    """Import the consumer ``name`` and return its handler, wired to the default session's clients."""
    module = importlib.import_module(MODULES[name])
    if name != "ours":
        import boto3

        module.configure(
            dynamodb=boto3.client("dynamodb"),
            sns=boto3.client("sns"),
            env={variable: os.environ[variable] for variable in PEER_VARIABLES[name]},
        )
    handler: Callable[[dict[str, Any], Any], Any] = module.handler
    return handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.worker", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(MODULES))
    parser.add_argument("--cpu", type=int, help="the core to pin the process to")
    parser.add_argument("--profile", action="store_true", help="profile every thread (CPU by component)")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    from bench import components

    if args.profile:
        components.install_thread_profilers()
    handler = load_handler(args.name)
    main_profiler = components.new_profiler() if args.profile else None
    answers.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    context = Context()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "exit":
            break
        if request["op"] == "baseline":
            components.set_baseline()
            answers.write(json.dumps({}) + "\n")
            continue
        if request["op"] == "components":
            seconds = components.breakdown(components.collected())
            answers.write(json.dumps({"components": seconds}) + "\n")
            continue
        event = request["event"]
        if main_profiler is not None:
            main_profiler.enable()
        cpu, wall = time.process_time(), time.perf_counter()
        response = handler(event, context)
        wall_ms, cpu_ms = (time.perf_counter() - wall) * 1000.0, (time.process_time() - cpu) * 1000.0
        if main_profiler is not None:
            main_profiler.disable()
        failures = len((response or {}).get("batchItemFailures", []))
        answers.write(json.dumps({"wall_ms": wall_ms, "cpu_ms": cpu_ms, "failures": failures}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
