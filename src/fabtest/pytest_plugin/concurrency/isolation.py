"""What keeps scenarios in flight at once apart inside one pytest session (docs/concurrency.md).

pytest assumes one test at a time: a function-scoped fixture caches its value and finalizers on
the one ``FixtureDef`` every test shares, and ``SetupState`` is a stack that holds one item. With
several scenarios in flight, this module gives each in-flight item

- its own copies of every function-scoped ``FixtureDef`` (also those a step first requests while
  the scenario runs), so cached values and teardowns are per item (:class:`ItemFixtureDefs`);
- its own finalizer list, detached from the stack after its setup, so the next item can be set up
  and the item's teardown still runs its own finalizers (:class:`ConcurrentSetupState`);
- collectors (feature modules) that are no longer on the stack but still needed by an item in
  flight stay alive ("parked") until the last such item is torn down.

Higher-scoped fixtures are shared, as in a sequential run; their execution is serialized with
:data:`REGISTRY_LOCK` (also held around pytest-bdd's step lookup, which registers a temporary
fixture under a name every scenario with the same step text shares, and while the setup state
changes).
"""

from __future__ import annotations

import copy
import importlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FunctionType
from typing import Any

import pytest
from _pytest.fixtures import FixtureDef
from _pytest.nodes import Node
from _pytest.outcomes import TEST_OUTCOME
from _pytest.runner import SetupState
from _pytest.scope import Scope

__all__ = ["REGISTRY_LOCK", "UNSHAREABLE_FIXTURES", "ConcurrentSetupState", "isolate_item", "quick_request_fixturedefs",
           "serialized_step_lookup"]

#: held while fixture registries or shared (non-function) fixtures change hands between threads
REGISTRY_LOCK = threading.RLock()

#: fixtures that change process-wide state, so a scenario using them runs alone (name -> why)
UNSHAREABLE_FIXTURES = {
    "capsys": "uses capsys (pytest's capture is process-wide)",
    "capsysbinary": "uses capsysbinary (pytest's capture is process-wide)",
    "capfd": "uses capfd (pytest's capture is process-wide)",
    "capfdbinary": "uses capfdbinary (pytest's capture is process-wide)",
    "caplog": "uses caplog (its handler sees every thread's records)",
    "monkeypatch": "uses monkeypatch (it changes process-wide state)",
}

_Finalizers = list[Callable[[], object]]
_Entry = tuple[_Finalizers, Any]


class ConcurrentSetupState(SetupState):
    """pytest's SetupState, allowing several items between their setup and their teardown.

    ``detach(item)`` after a successful setup moves the item's finalizers off the stack; the
    scheduler sets :attr:`finishing` before the item's teardown phase, whose ``teardown_exact`` then
    runs that item's finalizers and only the collectors no item in flight (nor the next) needs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.detached: dict[Node, _Entry] = {}
        #: how many detached items descend from each collector (kept as items come and go: scanning
        #: every item in flight on each setup and teardown cost O(N) each, O(N^2) a run, at 1,000 at once)
        self._ancestors: Counter[Node] = Counter()
        self.parked: dict[Node, _Entry] = {}
        self.finishing: pytest.Item | None = None

    def is_node_active(self, node: Node) -> bool:
        with REGISTRY_LOCK:
            return node in self.stack or node in self.detached or node in self.parked

    def addfinalizer(self, finalizer: Callable[[], object], node: Node) -> None:
        with REGISTRY_LOCK:
            for table in (self.detached, self.parked):
                if node in table:
                    table[node][0].append(finalizer)
                    return
            super().addfinalizer(finalizer, node)

    def setup(self, item: pytest.Item) -> None:
        """pytest's ``setup`` after making room: collectors not in the item's chain leave the stack
        (parked while an item in flight needs them), parked ones it needs come back. The item's own
        fixtures are set up outside the lock, so scenarios in flight are not held up by them."""
        with REGISTRY_LOCK:
            needed = item.listchain()
            while self.stack and list(self.stack) != needed[: len(self.stack)]:
                node, entry = self.stack.popitem()  # still needed by an item in flight, or released below
                self.parked[node] = entry
            for col in needed[len(self.stack):-1]:
                if col not in self.parked:
                    break
                self.stack[col] = self.parked.pop(col)  # set up already: back on the stack, not set up twice
            errors = self._release(self._in_use(item))
            for _col, (_, exc) in self.stack.items():
                if exc:
                    raise exc[0].with_traceback(exc[1])
            for col in needed[len(self.stack):-1]:
                self.stack[col] = ([col.teardown], None)
                self._setup_node(col)
            self.stack[item] = ([item.teardown], None)
        self._setup_node(item)
        _raise(errors)

    def _setup_node(self, node: Node) -> None:
        """As pytest's SetupState does: a failed setup is kept and raised again for later items."""
        try:
            node.setup()
        except TEST_OUTCOME as exc:
            with REGISTRY_LOCK:
                self.stack[node] = (self.stack[node][0], (exc, exc.__traceback__))
            raise

    def detach(self, item: pytest.Item) -> None:
        """Move the (just set up) item off the stack: it stays set up until its teardown."""
        with REGISTRY_LOCK:
            if item in self.stack:
                self.detached[item] = self.stack.pop(item)
                self._ancestors.update(item.listchain()[:-1])

    @property
    def in_flight(self) -> int:
        return len(self.detached)

    def teardown_exact(self, nextitem: pytest.Item | None) -> None:
        item, self.finishing = self.finishing, None
        if item is not None and item in self.detached:
            with REGISTRY_LOCK:
                finalizers = self.detached.pop(item)[0]
                for node in item.listchain()[:-1]:
                    self._ancestors[node] -= 1
                    if self._ancestors[node] <= 0:  # no item in flight descends from it any more
                        del self._ancestors[node]
            errors = _finalize(item, finalizers)  # outside the lock: scenarios in flight go on meanwhile
        elif item is not None and item in self.stack and list(self.stack)[-1] is item:
            with REGISTRY_LOCK:
                finalizers = self.stack.popitem()[1][0]
            errors = _finalize(item, finalizers)
        else:
            errors = []
        with REGISTRY_LOCK:
            keep = self._in_use(nextitem)
            while self.stack and list(self.stack)[-1] not in keep:
                node, (finalizers, _) = self.stack.popitem()
                errors += _finalize(node, finalizers)
            errors += self._release(keep)
        _raise(errors)

    def _in_use(self, nextitem: pytest.Item | None) -> set[Node]:
        """Every node the next item or an item in flight descends from (the items in flight
        themselves are never on the stack nor parked, so they need not be in it)."""
        used = set(self._ancestors)
        if nextitem is not None:
            used.update(nextitem.listchain())
        return used

    def _release(self, keep: set[Node]) -> list[BaseException]:
        """Tear down parked collectors nobody needs any more, deepest first."""
        errors: list[BaseException] = []
        for node in sorted(self.parked, key=lambda n: -len(n.listchain())):
            if node not in keep:
                errors += _finalize(node, self.parked.pop(node)[0])
        return errors


def _finalize(node: Node, finalizers: _Finalizers) -> list[BaseException]:
    """Run ``finalizers`` last-first, as SetupState does; what they raise is collected, not lost."""
    raised: list[BaseException] = []
    while finalizers:
        try:
            finalizers.pop()()
        except TEST_OUTCOME as exc:
            raised.append(exc)
    if len(raised) > 1:
        return [BaseExceptionGroup(f"errors while tearing down {node!r}", raised[::-1])]
    return raised


def _raise(errors: list[BaseException]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise BaseExceptionGroup("errors during test teardown", errors[::-1])


# -- fixtures -------------------------------------------------------------------------------------
class ItemFixtureDefs(dict[str, Any]):
    """The fixture definitions one in-flight item sees: function-scoped ones copied for the item,
    shared ones behind :class:`_SerializedDef`; looked up in pytest's registry when a step asks for
    a name its scenario did not declare (``request.getfixturevalue`` at call time)."""

    def __init__(self, item: pytest.Item, base: Mapping[str, Sequence[FixtureDef[Any]]]) -> None:
        super().__init__({name: _isolated(defs) for name, defs in base.items()})
        self._item = item

    def get(self, name: str, default: Any = None) -> Any:
        found = super().get(name)
        if found is not None:
            return found
        if name in UNSHAREABLE_FIXTURES:
            raise pytest.UsageError(
                f"{self._item.nodeid}: a step requested the fixture {name!r} while the scenario ran concurrently, "
                f"but a scenario that {UNSHAREABLE_FIXTURES[name]} must run alone; "
                "tag the scenario @fabtest_serial to run it alone")
        with REGISTRY_LOCK:
            defs = self._item.session._fixturemanager.getfixturedefs(name, self._item)
        return default if defs is None else _isolated(defs)


def isolate_item(item: pytest.Item) -> None:
    """Give ``item`` its own function-scoped fixture definitions (before its setup)."""
    request = getattr(item, "_request", None)
    if request:
        request._arg2fixturedefs = ItemFixtureDefs(item, request._arg2fixturedefs)


def _isolated(defs: Sequence[FixtureDef[Any]]) -> Sequence[FixtureDef[Any]]:
    out: list[Any] = []
    for fixturedef in defs:
        if fixturedef._scope is Scope.Function:
            mine = copy.copy(fixturedef)
            mine.cached_result = None
            mine.__dict__["_finalizers"] = []  # Final in pytest: set once per definition, here per copy
            out.append(mine)
        else:
            out.append(_SerializedDef(fixturedef))
    return tuple(out)


class _SerializedDef:
    """A shared fixture definition whose execution (the check of its cache included) is serialized,
    so two scenarios asking for a module- or session-scoped fixture at once set it up once."""

    def __init__(self, target: FixtureDef[Any]) -> None:
        object.__setattr__(self, "_target", target)

    def execute(self, request: Any) -> Any:
        with REGISTRY_LOCK:
            return self._target.execute(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)


# -- pytest-bdd -----------------------------------------------------------------------------------
@contextmanager
def serialized_step_lookup() -> Iterator[None]:
    """While active, pytest-bdd's step lookup and ``target_fixture`` injection hold REGISTRY_LOCK:
    both change the session's fixture registry under names shared by every scenario.

    The lookup is also remembered per (collector, step type, step text): pytest-bdd looks through
    every fixture of the session for the definitions that parse a step, for each step of each
    scenario, and inspects the step function's signature twice per step; at 1,000 scenarios at
    once that was a quarter of the scenarios' threads' work, all of it under the lock. The fixtures
    a collector's items see do not change during the run (pytest-bdd's injection is temporary), so
    the answer for one scenario is the answer for every other scenario of the same file."""
    bdd = importlib.import_module("pytest_bdd.scenario")  # the package exports a function of that name

    names = ("get_step_function", "inject_fixture", "signature", "get_required_args")
    originals = {name: getattr(bdd, name) for name in names}

    def locked(func: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            with REGISTRY_LOCK:
                return func(*args, **kwargs)
        return call

    found: dict[tuple[Any, str, str], Any] = {}
    lookup = locked(originals["get_step_function"])

    def step_function(request: Any, step: Any) -> Any:
        __tracebackhide__ = True
        key = (request.node.parent, step.type, step.name)
        context = found.get(key)
        if context is None:
            context = lookup(request, step)
            if context is not None:  # a step nothing parses fails its scenario: not worth remembering
                found[key] = context
        return context

    patched = {"get_step_function": step_function, "inject_fixture": locked(originals["inject_fixture"]),
               "signature": _remembered(originals["signature"]),
               "get_required_args": _remembered(originals["get_required_args"])}
    for name, func in patched.items():
        setattr(bdd, name, func)
    try:
        yield
    finally:
        for name, func in originals.items():
            setattr(bdd, name, func)


def _remembered(inspect_function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``inspect_function(step_function)`` computed once per step function (a signature, its
    required arguments: neither changes during a run)."""
    answers: dict[Any, Any] = {}

    def remembered(func: Any) -> Any:
        try:
            return answers[func]
        except KeyError:
            answer = answers[func] = inspect_function(func)
            return answer
        except TypeError:  # an unhashable callable: asked every time, as before
            return inspect_function(func)
    return remembered


# -- pytest ---------------------------------------------------------------------------------------
@contextmanager
def quick_request_fixturedefs() -> Iterator[None]:
    """While active, pytest's fixture definitions skip the signature of a function of no arguments.

    pytest makes a new definition of the ``request`` fixture (around ``lambda: request``) each
    time a fixture asks for ``request``, and reads that lambda's signature (``inspect.signature``)
    to learn it takes no argument: a fifth of the main thread's work at 1,000 scenarios at once.
    A plain function whose code takes no argument has no argument names; anything else is
    asked of pytest as before."""
    fixtures = importlib.import_module("_pytest.fixtures")
    original = getattr(fixtures, "getfuncargnames")  # noqa: B009 - imported there from _pytest.compat

    def getfuncargnames(function: Any, *, name: str = "", cls: type | None = None) -> tuple[str, ...]:
        code = getattr(function, "__code__", None)
        if (type(function) is FunctionType and code is not None and code.co_argcount == 0
                and code.co_kwonlyargcount == 0 and not hasattr(function, "__wrapped__")
                and not hasattr(function, "__signature__")):
            return ()
        return tuple(original(function, name=name, cls=cls))

    setattr(fixtures, "getfuncargnames", getfuncargnames)  # noqa: B010
    try:
        yield
    finally:
        setattr(fixtures, "getfuncargnames", original)  # noqa: B010
