"""A deterministic scheduler: actors on threads, one running at a time, every choice enumerated.

Each actor runs on its own thread and stops at every scheduling point (an AWS call, a handler's
return) until the scheduler lets it through. One execution is driven by a list of choices; the
explorer (:func:`explore`) enumerates executions depth-first, replaying each from scratch (a fresh
world per execution), so a schedule is just its list of choices and replays exactly.

At each point the scheduler may let the call through, crash the actor there (the Lambda dies: it
makes no further call and its response is lost) or answer the call with an injected fault, within
per-execution bounds.

Reduction: sleep sets (Godefroid). Two transitions of different actors are independent when their
footprints (the DynamoDB items, index shards, topics and queues each reads or writes) do not
conflict. A fault changes nothing outside its actor (an empty footprint); so does a crash, unless
the actor was given a crash footprint: a delivery on its messages' last receive, whose crash lets
SQS dead-letter them into the DLQ a redrive reads. After the subtree of transition ``t`` at a node
is explored, ``t`` sleeps in the subtrees of its siblings until a dependent transition wakes it: an
execution that only reorders independent transitions of one already explored is not explored again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: ``(resource, mode)``: mode ``"r"`` reads, ``"w"`` writes.
Access = tuple[str, str]
Footprint = frozenset[Access]

CALL = "call"
CRASH = "crash"
FAULT_PREFIX = "fault:"


class Crash(BaseException):
    """The actor dies here: raised at its scheduling point, never caught by the code under test."""


class Pruned(BaseException):
    """The execution is abandoned (every enabled transition sleeps): its actors are unwound."""


@dataclass(frozen=True)
class Point:
    """Where an actor waits: its next move, what it touches, and what may happen instead."""

    label: str
    footprint: Footprint
    crashable: bool = True
    faults: tuple[str, ...] = ()


@dataclass(frozen=True)
class Transition:
    """One move: ``actor``'s ``step``-th point taken with ``action`` (call, crash or fault:<kind>)."""

    actor: str
    step: int
    action: str
    footprint: Footprint

    def __str__(self) -> str:
        return f"{self.actor}#{self.step}:{self.action}"


def conflicting(first: Footprint, second: Footprint) -> bool:
    """Whether two footprints touch one resource and at least one of them writes it."""
    touched = {resource for resource, _ in first}
    return any(resource in touched and (mode == "w" or (resource, "w") in first) for resource, mode in second)


def independent(first: Transition, second: Transition) -> bool:
    """Whether the two moves commute: different actors whose footprints do not conflict (a fault's is
    empty, a crash's is its actor's crash footprint)."""
    return first.actor != second.actor and not conflicting(first.footprint, second.footprint)


@dataclass(frozen=True)
class Bounds:
    """Per execution: how many crashes and how many injected faults the scheduler may choose."""

    crashes: int = 1
    faults: int = 1


class _Actor:
    def __init__(self, name: str, body: Callable[[], Any]) -> None:
        self.name = name
        self.body = body
        self.step = 0
        self.point: Point | None = None
        self.decision: str | None = None
        self.finished = False
        self.dead = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None


_current = threading.local()


def current_actor() -> str | None:
    """The actor running on this thread (None on the harness's own thread)."""
    return getattr(_current, "name", None)


class Execution:
    """One execution: the actors, run one at a time, following ``choose``'s decisions."""

    def __init__(
        self,
        actors: Sequence[tuple[str, Callable[[], Any]]],
        bounds: Bounds,
        crash_footprints: Mapping[str, Footprint] | None = None,
    ) -> None:
        self._actors = {name: _Actor(name, body) for name, body in actors}
        #: Per actor, what its crash touches (default: nothing outside the actor).
        self._crash_footprints = dict(crash_footprints or {})
        self._order = [name for name, _ in actors]
        self._bounds = bounds
        self._cv = threading.Condition()
        self._running: str | None = None
        self._pruned = False
        self.crashes = 0
        self.faults = 0
        self.trace: list[Transition] = []
        #: Called (on the scheduler's thread, after the move) for every transition taken.
        self.on_move: Callable[[Transition], None] = lambda _: None
        #: The state as far as the future is concerned (None: do not prune from here).
        self.state_key: Callable[[], str | None] = lambda: None

    # --- the actor side ---------------------------------------------------------------------------

    def point(self, point: Point) -> str:
        """Block the calling actor at ``point`` until scheduled; return the action (raise Crash to die)."""
        name = current_actor()
        if name is None or name not in self._actors:
            return CALL  # the harness's own calls (the drain) are not scheduled
        actor = self._actors[name]
        if self._pruned:
            raise Pruned
        if actor.dead:
            raise Crash(f"{name} is dead")
        with self._cv:
            actor.point = point
            actor.decision = None
            self._running = None
            self._cv.notify_all()
            while actor.decision is None and not self._pruned:
                self._cv.wait()
            if self._pruned:
                raise Pruned
            decision = actor.decision
            actor.point = None
            actor.step += 1
        if decision == CRASH:
            actor.dead = True
            raise Crash(f"{name} crashed at {point.label}")
        return decision

    def _run_actor(self, actor: _Actor) -> None:
        _current.name = actor.name
        try:
            actor.result = actor.body()
        except (Crash, Pruned):
            actor.dead = True
        except BaseException as exc:
            actor.error = exc
        finally:
            with self._cv:
                actor.finished = True
                self._running = None
                self._cv.notify_all()

    # --- the scheduler side -------------------------------------------------------------------------

    def _wait_quiet(self) -> None:
        with self._cv:
            while self._running is not None:
                self._cv.wait()

    def start(self) -> None:
        """Start the actors one after the other, each up to its first point."""
        for name in self._order:
            actor = self._actors[name]
            with self._cv:
                self._running = name
            actor.thread = threading.Thread(target=self._run_actor, args=(actor,), name=f"actor-{name}", daemon=True)
            actor.thread.start()
            self._wait_quiet()

    def enabled(self) -> list[Transition]:
        """Every transition possible now, in a fixed order (actor order; call, crash, then faults)."""
        moves: list[Transition] = []
        for name in self._order:
            actor = self._actors[name]
            point = actor.point
            if actor.finished or point is None:
                continue
            moves.append(Transition(name, actor.step, CALL, point.footprint))
            if point.crashable and self.crashes < self._bounds.crashes:
                moves.append(Transition(name, actor.step, CRASH, self._crash_footprints.get(name, frozenset())))
            if self.faults < self._bounds.faults:
                moves.extend(Transition(name, actor.step, FAULT_PREFIX + kind, frozenset()) for kind in point.faults)
        return moves

    def take(self, move: Transition) -> None:
        """Let ``move``'s actor through its point with the move's action; wait until it stops again."""
        actor = self._actors[move.actor]
        assert actor.point is not None, f"replay diverged at {move}: {move.actor} is not waiting"
        assert actor.step == move.step, f"replay diverged at {move}: {move.actor} is at step {actor.step}"
        if move.action == CRASH:
            self.crashes += 1
        elif move.action.startswith(FAULT_PREFIX):
            self.faults += 1
        self.trace.append(move)
        with self._cv:
            self._running = move.actor
            actor.decision = move.action
            self._cv.notify_all()
        self._wait_quiet()
        self.on_move(move)

    def abandon(self) -> None:
        """Unwind every actor still waiting at a point (the execution is pruned)."""
        with self._cv:
            self._pruned = True
            self._cv.notify_all()
        self.join()

    def join(self) -> None:
        for actor in self._actors.values():
            if actor.thread is not None:
                actor.thread.join()

    def local_states(self) -> tuple[tuple[str, int, bool, bool], ...]:
        """Per actor: name, steps taken, died, finished (with the call log, what decides its future)."""
        return tuple((a.name, a.step, a.dead, a.finished) for a in self._actors.values())

    def results(self) -> dict[str, tuple[Any, BaseException | None, bool]]:
        """Per actor: its return value, an unexpected error, whether it died."""
        return {name: (a.result, a.error, a.dead) for name, a in self._actors.items()}


@dataclass
class _Node:
    options: list[Transition]
    sleep: set[Transition]
    done: list[Transition] = field(default_factory=list)
    current: Transition | None = None

    def next_option(self) -> Transition | None:
        for option in self.options:
            if option not in self.sleep and option not in self.done:
                return option
        return None


@dataclass
class Outcome:
    """One explored execution: its schedule and, when it was complete, what the checker said."""

    schedule: list[Transition]
    complete: bool
    violation: str | None = None


def explore(
    run_one: Callable[[Callable[[Execution], None]], Outcome],
    *,
    limit: int | None = None,
) -> Iterator[Outcome]:
    """Depth-first over every schedule (sleep sets prune reorderings of independent moves).

    ``run_one(drive)`` builds a fresh world and an :class:`Execution`, calls ``drive(execution)``
    (which takes the moves), checks the invariants and returns the outcome.
    """
    stack: list[_Node] = []
    explored = 0
    #: State caching: each state reached, with the smallest sleep set it was explored under. A state
    #: reached again under a sleep set that includes that one has nothing left to show.
    visited: dict[str, frozenset[Transition]] = {}
    while True:
        depth = 0

        def drive(execution: Execution) -> None:
            nonlocal depth
            execution.start()
            while True:
                options = execution.enabled()
                if not options:
                    return
                if depth < len(stack):
                    node = stack[depth]
                    assert [str(o) for o in node.options] == [str(o) for o in options], (
                        f"replay diverged at depth {depth}: {node.options} != {options}"
                    )
                else:
                    parent = stack[depth - 1] if depth else None
                    sleep: set[Transition] = set()
                    if parent is not None and parent.current is not None:
                        taken = parent.current
                        sleep = {t for t in (parent.sleep | set(parent.done)) if independent(t, taken)}
                    node = _Node(options=options, sleep=sleep)
                    node.current = node.next_option()
                    if node.current is None:  # every enabled move sleeps: a reordering already explored
                        execution.abandon()
                        raise Pruned
                    key = execution.state_key()
                    if key is not None:
                        seen = visited.get(key)
                        if seen is not None and seen <= sleep:  # explored from here with fewer moves asleep
                            execution.abandon()
                            raise Pruned
                        visited[key] = frozenset(sleep) if seen is None else seen & frozenset(sleep)
                    stack.append(node)
                assert node.current is not None
                execution.take(node.current)
                depth += 1

        outcome = run_one(drive)
        explored += 1
        yield outcome
        if outcome.violation is not None or (limit is not None and explored >= limit):
            return
        while stack:
            node = stack[-1]
            assert node.current is not None
            node.done.append(node.current)
            node.current = node.next_option()
            if node.current is not None:
                break
            stack.pop()
        if not stack:
            return
