"""CPU by component: a cProfile of every thread of a consumer, aggregated by module.

:func:`install_thread_profilers` gives each thread started afterwards its own ``cProfile.Profile``
on the thread's CPU clock (``time.thread_time``: time a thread spends blocked on a socket counts
nothing), and :func:`breakdown` sums the ``tottime`` of every function by the component its module
belongs to (:data:`COMPONENTS`, first match wins). Builtins (C functions: ``~`` as file name) and
the generic standard-library helpers of :data:`NEUTRAL` have no component of their own: their time
goes to their callers' components, split as the profile recorded it per caller (so ``hmac_digest``
called from botocore's signer is signing, ``openssl_sha256`` called from the consumer's code is
hashing, ``json.loads`` called by botocore's parser is response parsing). The profile slows the
code it measures, so only its shares are used, applied to CPU time measured without it.
"""

from __future__ import annotations

import cProfile
import pstats
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

#: (component, path pattern), first match wins; paths are matched with "/" separators.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("signing", r"botocore/(auth|signers|credentials)\.py|/hmac\.py$"),
    ("request validation", r"botocore/validate\.py"),
    ("request serialization", r"botocore/serialize\.py"),
    ("response parsing", r"botocore/parsers\.py|/xml/"),
    ("endpoint rules", r"botocore/(endpoint_provider|regions)\.py"),
    (
        "HTTP (urllib3, http.client)",
        r"/urllib3/|/http/|/email/|/socket\.py$|/ssl\.py$|/selectors\.py$|botocore/(httpsession|awsrequest|response)\.py",
    ),
    ("botocore other (hooks, retries, models)", r"/botocore/|/boto3/|/jmespath/|/dateutil/|/s3transfer/"),
    ("Powertools", r"/aws_lambda_powertools/"),
    ("message parsing (json, decimal)", r"/json/|/decimal\.py$|/_pydecimal\.py$"),
    ("consumer code", r"/order_consumer/|/bench/consumers/"),
    ("threads", r"/threading\.py$|/concurrent/|/queue\.py$"),
    ("logging", r"/logging/"),
)
#: Generic standard-library code whose time belongs to whoever called it.
NEUTRAL = re.compile(
    r"/re/[^/]+\.py$|/(copy|functools|typing|abc|enum|base64|datetime|uuid|hashlib|contextlib|weakref|_weakrefset|"
    r"collections/__init__|calendar|string|random|struct|codecs|encodings/[^/]+|os|posixpath|genericpath|"
    r"urllib/parse|locale|types|dataclasses|operator|inspect|keyword|textwrap)\.py$|^<frozen |^<string>$"
)
HASHING = "hashing"
OTHER = "other"
_HASH_BUILTIN = re.compile(r"_hashlib|sha256|sha1|md5|hmac|openssl", re.IGNORECASE)
_JSON_BUILTIN = re.compile(r"_json|json\.")
_MESSAGE_PARSING = "message parsing (json, decimal)"
_BOTOCORE = ("signing", "request validation", "request serialization", "response parsing", "endpoint rules")
_COMPILED = tuple((name, re.compile(pattern)) for name, pattern in COMPONENTS)

Function = tuple[str, int, str]

_profilers: list[cProfile.Profile] = []
_profilers_lock = threading.Lock()


def new_profiler() -> cProfile.Profile:
    """A profiler on the calling thread's CPU clock, kept for :func:`collected`."""
    profiler = cProfile.Profile(time.thread_time)
    with _profilers_lock:
        _profilers.append(profiler)
    return profiler


def install_thread_profilers() -> None:
    """Profile every thread started from now on (worker pools included), from its first Python call."""

    def start(frame: Any, event: str, arg: Any) -> None:
        # threading.setprofile installs this as the new thread's hook; at its first event it replaces
        # itself with a cProfile of the thread.
        new_profiler().enable()

    threading.setprofile(start)


def collected() -> list[cProfile.Profile]:
    with _profilers_lock:
        return list(_profilers)


def _own_component(path: str) -> str | None:
    """The component of a file, or None for builtins and neutral helpers."""
    normalized = path.replace("\\", "/")
    if normalized == "~" or NEUTRAL.search(normalized):
        return None
    for name, pattern in _COMPILED:
        if pattern.search(normalized):
            return name
    return OTHER


def _snapshot(profilers: Iterable[cProfile.Profile]) -> dict[Function, Any]:
    """The stats of these profilers summed, without disabling them.

    Disabling a profiler from another thread would close its thread's pending call (an idle pool
    thread's queue wait) on the calling thread's clock.
    """
    snapshots = []
    for profiler in profilers:
        profiler.snapshot_stats()  # type: ignore[attr-defined]
        if profiler.stats:  # type: ignore[attr-defined]
            snapshots.append(_Snapshot(profiler.stats))  # type: ignore[attr-defined]
    if not snapshots:
        return {}
    stats: dict[Function, Any] = pstats.Stats(*snapshots).stats  # type: ignore[arg-type, attr-defined]
    return stats


_baseline: dict[Function, Any] = {}


def set_baseline() -> None:
    """Leave out of :func:`breakdown` everything profiled so far (imports, client creation, warm-up)."""
    _baseline.clear()
    _baseline.update(_snapshot(collected()))


def _minus(stats: dict[Function, Any], before: dict[Function, Any]) -> dict[Function, Any]:
    result = {}
    for function, (cc, nc, tt, ct, callers) in stats.items():
        old = before.get(function)
        if old is not None:
            tt -= old[2]
            old_callers = old[4]
            callers = {
                caller: (t[0], t[1], t[2] - old_callers.get(caller, (0, 0, 0.0, 0.0))[2], t[3])
                for caller, t in callers.items()
            }
        if tt > 0:
            result[function] = (cc, nc, tt, ct, callers)
    return result


def breakdown(profilers: Iterable[cProfile.Profile]) -> dict[str, float]:
    """CPU seconds by component over these profilers since :func:`set_baseline`."""
    return _attribute(_minus(_snapshot(profilers), _baseline))


class _Snapshot:
    """A profile's stats as :class:`pstats.Stats` loads them (``create_stats`` would disable the profiler)."""

    def __init__(self, stats: dict[Function, Any]) -> None:
        self.stats = dict(stats)

    def create_stats(self) -> None:
        """Already made."""


def _attribute(stats: dict[Function, Any]) -> dict[str, float]:
    cache: dict[Function, dict[str, float]] = {}

    def shares(function: Function, seen: frozenset[Function]) -> dict[str, float]:
        """How the time of ``function`` divides among components (fractions summing to 1)."""
        if function in cache:
            return cache[function]
        own = _own_component(function[0])
        if own is not None:
            result = {own: 1.0}
        else:
            callers = stats.get(function, (0, 0, 0.0, 0.0, {}))[4]
            weights = {caller: timing[2] for caller, timing in callers.items() if caller not in seen}
            total = sum(weights.values())
            if total <= 0:
                weights = {caller: 1.0 for caller in callers if caller not in seen}
                total = float(len(weights))
            result = {}
            for caller, weight in weights.items():
                for name, fraction in shares(caller, seen | {function}).items():
                    result[name] = result.get(name, 0.0) + fraction * weight / total
            if not result:
                result = {OTHER: 1.0}
            result = _relabel(function, result)
        cache[function] = result
        return result

    totals: dict[str, float] = {}
    for function, (_, _, tottime, _, _) in stats.items():
        for name, fraction in shares(function, frozenset()).items():
            totals[name] = totals.get(name, 0.0) + tottime * fraction
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def _relabel(function: Function, inherited: dict[str, float]) -> dict[str, float]:
    """Hash and JSON builtins outside botocore are hashing and message parsing, not their caller's code."""
    name = function[2]
    if function[0] == "~" and _HASH_BUILTIN.search(name):
        target = HASHING
    elif function[0] == "~" and _JSON_BUILTIN.search(name):
        target = _MESSAGE_PARSING
    else:
        return inherited
    result: dict[str, float] = {}
    for component, fraction in inherited.items():
        key = component if component in _BOTOCORE or component.startswith(("HTTP", "botocore")) else target
        result[key] = result.get(key, 0.0) + fraction
    return result
