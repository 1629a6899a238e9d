"""CPU by component: modules map to components, builtins and helpers count with their callers."""

from __future__ import annotations

from typing import Any

import pytest

from bench import components

SITE = "/venv/lib/python3.11/site-packages"
LIB = "/usr/lib/python3.11"


@pytest.mark.parametrize(
    ("path", "component"),
    [
        pytest.param(f"{SITE}/botocore/auth.py", "signing", id="sigv4"),
        pytest.param(f"{LIB}/hmac.py", "signing", id="hmac"),
        pytest.param(f"{SITE}/botocore/validate.py", "request validation", id="validation"),
        pytest.param(f"{SITE}/botocore/serialize.py", "request serialization", id="serialization"),
        pytest.param(f"{SITE}/botocore/parsers.py", "response parsing", id="parsing"),
        pytest.param(f"{SITE}/botocore/endpoint_provider.py", "endpoint rules", id="endpoint-rules"),
        pytest.param(f"{SITE}/urllib3/connectionpool.py", "HTTP (urllib3, http.client)", id="urllib3"),
        pytest.param(f"{LIB}/http/client.py", "HTTP (urllib3, http.client)", id="http-client"),
        pytest.param(f"{SITE}/botocore/hooks.py", "botocore other (hooks, retries, models)", id="hooks"),
        pytest.param(f"{SITE}/aws_lambda_powertools/logging/logger.py", "Powertools", id="powertools"),
        pytest.param(f"{LIB}/json/decoder.py", "message parsing (json, decimal)", id="json"),
        pytest.param("/repo/lambdas/order_consumer/pipeline.py", "consumer code", id="ours"),
        pytest.param(f"{LIB}/concurrent/futures/thread.py", "threads", id="pool"),
        pytest.param("~", None, id="builtin-has-none"),
        pytest.param(f"{LIB}/re/__init__.py", None, id="re-is-neutral"),
        pytest.param(f"{LIB}/copy.py", None, id="neutral-helper"),
        pytest.param("<frozen posixpath>", None, id="frozen-is-neutral"),
    ],
)
def test_module_paths_map_to_components(path: str, component: str | None) -> None:
    assert components._own_component(path) == component


def _entry(tottime: float, callers: dict[Any, float]) -> tuple[int, int, float, float, dict[Any, Any]]:
    return (1, 1, tottime, tottime, {caller: (1, 1, t, t) for caller, t in callers.items()})


def test_hash_builtins_are_signing_under_the_signer_and_hashing_elsewhere() -> None:
    signer = (f"{SITE}/botocore/auth.py", 1, "signature")
    consumer = ("/repo/lambdas/order_consumer/contract/message.py", 1, "payload_sha256")
    sha = ("~", 0, "<built-in method _hashlib.openssl_sha256>")
    # GIVEN 3 ms in sha256: 2 ms called by botocore's signer, 1 ms by the consumer's code
    stats = {
        signer: _entry(0.001, {}),
        consumer: _entry(0.001, {}),
        sha: _entry(0.003, {signer: 0.002, consumer: 0.001}),
    }
    totals = components._attribute(stats)
    assert totals["signing"] == pytest.approx(0.003)
    assert totals["hashing"] == pytest.approx(0.001)
    assert totals["consumer code"] == pytest.approx(0.001)


def test_neutral_helpers_count_with_their_callers_through_several_levels() -> None:
    parser = (f"{SITE}/botocore/parsers.py", 1, "parse")
    helper = (f"{LIB}/copy.py", 1, "deepcopy")
    builtin = ("~", 0, "<method 'get' of 'dict' objects>")
    stats = {parser: _entry(0.001, {}), helper: _entry(0.002, {parser: 0.002}), builtin: _entry(0.004, {helper: 0.004})}
    assert components._attribute(stats) == {"response parsing": pytest.approx(0.007)}


def test_breakdown_of_a_real_profile_leaves_out_the_baseline() -> None:
    import hmac

    profiler = components.new_profiler()
    profiler.enable()
    for _ in range(200):
        hmac.new(b"k" * 32, b"m" * 64, "sha256").digest()
    profiler.disable()
    components.set_baseline()
    # WHEN nothing more runs after the baseline
    assert components.breakdown([profiler]) == {}
    # WHEN more signing-like work runs after it
    profiler.enable()
    for _ in range(200):
        hmac.new(b"k" * 32, b"m" * 64, "sha256").digest()
    profiler.disable()
    totals = components.breakdown([profiler])
    # THEN it is signing (hmac.py and the hash builtins it calls)
    assert max(totals, key=lambda k: totals[k]) == "signing"
    assert totals["signing"] > 0
