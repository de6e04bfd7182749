"""``FakeLLM``: script the judge and the simulated user of your own domain, without a key.

You say what each *kind* of call answers (the simulated user's lines, a verdict per criterion,
the topic to move to, whether the goal was achieved, ...) and never read fabtest's prompts: the
judge and the simulator tag each call with an :class:`~fabtest.llm.calls.LLMCall` (its purpose
and the inputs its prompt was built from), and the fake answers from that. When fabtest rewords
a prompt, your script still holds. See the README section "Testing your own features offline".

Anything not scripted is an ``error`` naming the method to call, never a silent pass. Every call
is kept in :attr:`FakeLLM.calls` (the latest 10,000) so a test can assert what was asked.
"""

from __future__ import annotations

import difflib
import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabtest.conversation import TokenUsage
from fabtest.errors import UsageError
from fabtest.llm.base import Completion, LLMError
from fabtest.llm.calls import LLMCall, current_call

__all__ = ["FakeLLM", "FakeLLMError", "load_fake_llm"]

T = TypeVar("T", bound=BaseModel)

#: A scripted answer: a value, or a function of the call that returns one (or the JSON answer itself).
Answer = Any
_VERDICTS = ("passed", "failed", "inconclusive", "not_applicable")
_REASON = "scripted by FakeLLM"
MAX_KEPT_CALLS = 10_000


class FakeLLMError(LLMError):
    """The fake was asked something it has no answer for (failure type ``error``)."""


class FakeLLM:
    """An in-process LLM for the judge and the simulator, scripted by kind of call.

    The scripting methods return the fake, so they chain::

        fake = (FakeLLM().simulated_user(["hi", "a large pepperoni", "that's all"])
                .verdicts(default="passed", friendly="failed").topic("ordering").goal_achieved(True))
    """

    def __init__(self, *, provider: str = "fake", model: str = "scripted", note: str | None = None) -> None:
        self.provider = provider
        self.model = model
        #: Shown next to the provider in the summary and the experiment (``judge.note``).
        self.note = note if note is not None else "scripted fake LLM (fabtest.testing.FakeLLM), not a real model"
        #: The latest calls, oldest first (bounded: a long suite does not keep every conversation alive).
        self.calls: deque[LLMCall] = deque(maxlen=MAX_KEPT_CALLS)
        self._lock = threading.Lock()
        self._user: Answer = None
        self._then = "Thanks, that's all."
        self._verdicts: dict[str, Answer] = {}
        self._verdict_default: Answer = None
        self._intents: dict[str, Answer] = {}
        self._intent_default: Answer = None
        self._goal: Answer = None
        self._topics: Answer = None
        self._grounded: dict[str, Answer] = {}
        self._grounded_default: Answer = None
        self._text: Answer = None
        self._fidelity: Answer = {"reasoning": _REASON, "invented": [], "spoke_as_agent": False}
        #: the script file this fake was loaded from: its errors then say what to add to the file
        self.source: str | None = None
        self._agent_script: Any = None
        self._agent_then: str | None = None
        self._scenarios: Answer = None
        self._tools: dict[str, Any] = {}
        self._extractions: dict[str, Any] = {}
        self._sim_counts: dict[int, tuple[weakref.ref[Any], int]] = {}

    # -- scripting ---------------------------------------------------------------------------------
    def simulated_user(self, lines: Sequence[str | Mapping[str, Any]] | Callable[[LLMCall], Any], *,
                       then: str = "Thanks, that's all.") -> FakeLLM:
        """The user's messages in order, restarted for every conversation; after the last one the user
        says ``then`` and declares its goal complete. A line may be ``{"message": ..., "files": [...]}``:
        the files (of ``Given the user has the files``) it attaches. A function of the call may return
        the message, ``None`` (goal complete) or ``{"message": ..., "goal_complete": ...}``."""
        if isinstance(lines, str):
            lines = [lines]
        self._user = lines if callable(lines) else [dict(line) if isinstance(line, Mapping) else str(line)
                                                     for line in lines]
        self._then = then
        return self

    def tool_results(self, by_name: Mapping[str, Any]) -> FakeLLM:
        """What a simulated tool (``is simulated as``) returns, by tool name: a value for every call, a
        list answered in order (the last one repeats), or a function of the call."""
        self._tools.update(by_name)
        return self

    def extractions(self, by_what: Mapping[str, Any]) -> FakeLLM:
        """What ``When the response mentions WHAT as "name"`` takes, by WHAT: the value, ``None`` (not
        mentioned), or a function of the call (``call.response`` is the reply)."""
        self._extractions.update(by_what)
        return self

    def verdicts(self, by_name: Mapping[str, Answer] | None = None, /, *, default: Answer = None,
                 **more: Answer) -> FakeLLM:
        """The verdict per criterion name (``"passed"``, ``"failed"``, ``"inconclusive"``,
        ``"not_applicable"``, a bool, or a
        function of the call, whose ``criteria`` is then just that one criterion, returning a verdict
        or ``(verdict, reasoning)``); ``default`` for criteria not named. A criterion is found by its
        name or its description, so ad-hoc criteria, playbook ``expected_outcome`` and ``llm_checks``
        are keyed by their text: pass those in the mapping."""
        self._verdicts.update({_key(k): _check_verdict(v, k) for k, v in {**(by_name or {}), **more}.items()})
        if default is not None:
            self._verdict_default = _check_verdict(default, "default")
        return self

    def intents(self, by_intent: Mapping[str, Answer] | None = None, /, *, default: Answer = None) -> FakeLLM:
        """The verdict per intent text (``have the intent "..."``), and ``default`` for the others."""
        self._intents.update({_key(k): _check_verdict(v, k) for k, v in (by_intent or {}).items()})
        if default is not None:
            self._intent_default = _check_verdict(default, "default")
        return self

    def goal_achieved(self, value: Answer = True) -> FakeLLM:
        """The verdict on ``the goal ... be achieved`` (and persona playbooks' goal)."""
        self._goal = _check_verdict(value, "goal_achieved")
        return self

    def simulator_fidelity(self, invented: Sequence[str] | Callable[[LLMCall], Any] = (), *,
                           spoke_as_agent: bool = False) -> FakeLLM:
        """What the review of the simulated user finds (``simulator_fidelity``, docs "The simulated
        user"): the facts it ``invented`` and whether it ``spoke_as_agent``. Not scripted, the review
        finds nothing: a scripted user says only what the script says, so it invents nothing."""
        self._fidelity = invented if callable(invented) else {"reasoning": _REASON, "invented": list(invented),
                                                                "spoke_as_agent": spoke_as_agent}
        return self

    def topic(self, *names: str | Callable[[LLMCall], Any]) -> FakeLLM:
        """Topics to move to: the first of ``names`` that may follow the current topic wins, else the
        conversation stays where it is. A function of the call may return a topic name."""
        if not names:
            raise ValueError("topic() needs at least one topic name")
        self._topics = names[0] if len(names) == 1 and callable(names[0]) else [str(n) for n in names]
        return self

    def grounded(self, by_source: Mapping[str, Answer] | None = None, /, *, default: Answer = None,
                 **more: Answer) -> FakeLLM:
        """Whether a reply is grounded in a tool's results, per tool name (``True``/``False``, a
        verdict, or a function of the call), and ``default`` for the other tools."""
        self._grounded.update({k: _check_verdict(v, k) for k, v in {**(by_source or {}), **more}.items()})
        if default is not None:
            self._grounded_default = _check_verdict(default, "default")
        return self

    def scenarios(self, records: Sequence[Mapping[str, Any]] | Callable[[LLMCall], Any]) -> FakeLLM:
        """The drafts ``fabtest generate`` gets: records as its schema spells them (``id``, ``goal``,
        ``persona``, ``facts``, ``expected_tool``, ``topic``, ``category``, ``aims_at``), or a function of
        the call (its ``subject`` is the prompt) returning them."""
        self._scenarios = records if callable(records) else [dict(r) for r in records]
        return self

    def text(self, reply: str | Callable[[LLMCall | None], str]) -> FakeLLM:
        """The answer to free-text calls (``complete``), which fabtest itself does not make."""
        self._text = reply
        return self

    def agent_model(self, replies: Sequence[Any] | Callable[[Any], Any], *, then: str | None = None) -> FakeLLM:
        """The built-in agent's model (``[tool.fabtest.agents.NAME]`` with ``gemini``/``openai``): its
        replies in order, restarted for every agent (one per scenario), each a text,
        ``{"call": NAME, "args": {...}}`` or ``{"calls": [...]}``; or a function of the
        :class:`~fabtest.testing.FakeRequest` returning one. Past the last reply the agent says ``then``
        (without it, an error). See :mod:`fabtest.testing.scripted_chat`."""
        if not callable(replies):
            from fabtest.testing.scripted_chat import as_reply

            replies = [str(r) if isinstance(r, str) else r for r in replies]
            for number, reply in enumerate(replies, 1):
                as_reply(reply, where=f"agent_model reply {number}")
        self._agent_script, self._agent_then = replies, then
        return self

    @property
    def scripts_agent_model(self) -> bool:
        """True once :meth:`agent_model` was scripted: built-in agents may then run on this fake."""
        return self._agent_script is not None

    def chat_model(self, settings: Any, *, system: str, tools: list[Any]) -> Any:
        """A built-in agent's model playing the :meth:`agent_model` script (a new one per agent)."""
        from fabtest.testing.scripted_chat import ScriptedChat

        if self._agent_script is None:
            raise FakeLLMError("FakeLLM: no agent model scripted: "
                               + self._fix("fake.agent_model([...replies...])", "agent_model: [...replies...]"))
        return ScriptedChat(self._agent_script, then=self._agent_then, model=f"{self.model} (as {settings.model})",
                            system=system, tools=tools)

    # -- the LLM protocol ---------------------------------------------------------------------------
    def complete(self, prompt: str, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        call = current_call()
        with self._lock:
            if call is not None:
                self.calls.append(call)
        if self._text is None:
            raise FakeLLMError("FakeLLM: no free-text answer scripted: " + self._fix("fake.text(...)", 'text: "..."'))
        text = self._text(call) if callable(self._text) else self._text
        return Completion(text=str(text), usage=TokenUsage(calls=1), model=self.model)

    def complete_json(self, prompt: str, schema: type[T], *, system: str | None = None,
                      temperature: float | None = None) -> Completion[T]:
        call = current_call()
        if call is None:
            raise FakeLLMError(f"FakeLLM: a structured call ({schema.__name__}) that is not from fabtest's judge or "
                               "simulator; FakeLLM answers only those (see the docs, 'Run offline')")
        with self._lock:
            self.calls.append(call)
            data = getattr(self, f"_answer_{call.purpose}")(call)
        try:
            parsed = schema.model_validate(data)
        except ValidationError as exc:
            raise FakeLLMError(f"FakeLLM: the {call.purpose} answer {data!r} does not fit {schema.__name__}: "
                               f"{exc.errors()[0]['msg']}") from None
        import json

        return Completion(text=json.dumps(data), parsed=parsed, usage=TokenUsage(calls=1), model=self.model)

    def _fix(self, python: str, yaml_text: str) -> str:
        """How to script the missing answer, in the words of where the script lives (code or a file)."""
        if self.source is None:
            return f"call {python}"
        return f"add {yaml_text} to {self.source}"

    # -- answers by purpose (called under the lock) --------------------------------------------------
    def _answer_simulated_user(self, call: LLMCall) -> dict[str, Any]:
        if self._user is None:
            raise FakeLLMError("FakeLLM: no simulated user scripted: "
                               + self._fix("fake.simulated_user([...lines...])", "simulated_user: [...lines...]"))
        if callable(self._user):
            value = self._user(call)
            if value is None:
                return {"message": self._then, "goal_complete": True}
            return value if isinstance(value, dict) else {"message": str(value), "goal_complete": False}
        index = self._next_index(call)
        if index < len(self._user):
            line = self._user[index]
            if isinstance(line, dict):  # a message with the files it attaches
                return {"message": str(line.get("message", "")), "files": list(line.get("files") or []),
                        "goal_complete": False}
            return {"message": line, "goal_complete": False}
        return {"message": self._then, "goal_complete": True}

    def _next_index(self, call: LLMCall) -> int:
        """How many messages the simulated user has written in this conversation so far (an empty
        conversation starts again: a simulation run again after an invalid try starts from nothing)."""
        conversation = call.conversation
        if conversation is None:
            return 0
        fresh = not conversation.turns
        key = id(conversation)
        ref, count = self._sim_counts.get(key, (None, 0))
        if ref is None or ref() is not conversation or fresh:
            count = 0
            self._sim_counts = {k: v for k, v in self._sim_counts.items() if v[0]() is not None}
        self._sim_counts[key] = (weakref.ref(conversation), count + 1)
        return count

    def _answer_criteria(self, call: LLMCall) -> dict[str, Any]:
        verdicts = []
        for criterion in call.criteria:
            value = self._verdicts.get(_key(criterion.name), self._verdicts.get(_key(criterion.description)))
            value = self._verdict_default if value is None else value
            if value is None:
                raise FakeLLMError(f"FakeLLM: no verdict scripted for the criterion {criterion.name!r}: "
                                   + self._fix(f"fake.verdicts({{{criterion.name!r}: 'passed'}}) or "
                                               "fake.verdicts(default=...)",
                                               f"verdicts: {{{criterion.name!r}: passed}} (or verdicts: "
                                               f"{{default: passed}})"))
            verdict, reason = _verdict(value, replace(call, criteria=(criterion,)))
            verdicts.append({"criterion": criterion.name, "verdict": verdict, "reasoning": reason})
        return {"verdicts": verdicts}

    def _answer_intent(self, call: LLMCall) -> dict[str, Any]:
        value = self._intents.get(_key(call.intent or ""), self._intent_default)
        if value is None:
            raise FakeLLMError(f"FakeLLM: no verdict scripted for the intent {call.intent!r}: "
                               + self._fix(f"fake.intents({{{call.intent!r}: 'passed'}}) or fake.intents(default=...)",
                                           f"intents: {{{call.intent!r}: passed}} (or intents: {{default: passed}})"))
        return _verdict_answer(value, call)

    def _answer_goal(self, call: LLMCall) -> dict[str, Any]:
        if self._goal is None:
            raise FakeLLMError("FakeLLM: no goal verdict scripted: "
                               + self._fix("fake.goal_achieved(True or False)", "goal_achieved: true (or false)"))
        return _verdict_answer(self._goal, call)

    def _answer_simulator_fidelity(self, call: LLMCall) -> Any:
        if callable(self._fidelity):
            return self._fidelity(call)
        return self._fidelity

    def _answer_topic(self, call: LLMCall) -> dict[str, Any]:
        if self._topics is None:
            raise FakeLLMError(f"FakeLLM: no topic scripted (the conversation is in {call.current_topic!r}, may move "
                               f"to {', '.join(call.candidates)}): " + self._fix("fake.topic('name')", "topic: name"))
        if callable(self._topics):
            value = self._topics(call)
            return value if isinstance(value, dict) else {"topic": str(value), "reasoning": _REASON}
        wanted = {_key(c) for c in call.candidates}
        choice = next((name for name in self._topics if _key(name) in wanted), call.current_topic or "")
        return {"topic": choice, "reasoning": _REASON}

    def _answer_tool(self, call: LLMCall) -> dict[str, Any]:
        if call.tool not in self._tools:
            raise FakeLLMError(f"FakeLLM: no result scripted for the simulated tool {call.tool!r}: "
                               + self._fix(f"fake.tool_results({{{call.tool!r}: ...}})",
                                           f"tools: {{{call.tool}: ...}}"))
        value = self._tools[str(call.tool)]
        if callable(value):
            value = value(call)
        elif isinstance(value, list):
            value = value[min(len(call.tool_calls), len(value) - 1)] if value else None
        import json

        return {"result": json.dumps(value, ensure_ascii=False, default=str), "error": None}

    def _answer_extract(self, call: LLMCall) -> dict[str, Any]:
        if call.intent not in self._extractions:
            raise FakeLLMError(f"FakeLLM: nothing scripted to take {call.intent!r} from a reply: "
                               + self._fix(f"fake.extractions({{{call.intent!r}: ...}})",
                                           f"extract: {{{call.intent}: ...}}"))
        value = self._extractions[str(call.intent)]
        if callable(value):
            value = value(call)
        return {"found": value is not None, "value": "" if value is None else str(value)}

    def _answer_scenarios(self, call: LLMCall) -> dict[str, Any]:
        if self._scenarios is None:
            raise FakeLLMError("FakeLLM: no scenarios scripted for fabtest generate: call "
                               "fake.scenarios([...records...])")
        value = self._scenarios(call) if callable(self._scenarios) else self._scenarios
        return value if isinstance(value, dict) else {"records": list(value)}

    def _answer_grounding(self, call: LLMCall) -> dict[str, Any]:
        value = self._grounded.get(call.source or "", self._grounded_default)
        if value is None:
            raise FakeLLMError(f"FakeLLM: no grounding scripted for the tool {call.source!r}: "
                               + self._fix(f"fake.grounded({{{call.source!r}: True}}) or fake.grounded(default=True)",
                                           f"grounded: {{{call.source!r}: true}} (or grounded: true)"))
        if callable(value):
            value = value(call)
            if isinstance(value, dict):
                return value
        verdict = _as_verdict(value, "grounded")
        claim = " ".join(call.response.split())[:200] or "(the reply)"
        return {"claims": [{"claim": claim, "supported": verdict != "failed", "evidence": _REASON}], "note": _REASON}


def _key(name: str) -> str:
    return " ".join(str(name).strip().split()).casefold()


def _check_verdict(value: Answer, where: str) -> Answer:
    if callable(value):
        return value
    _as_verdict(value, where)
    return value


def _as_verdict(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "passed" if value else "failed"
    if isinstance(value, str) and value.strip().lower() in _VERDICTS:
        return value.strip().lower()
    raise ValueError(f"{where}: expected passed, failed, inconclusive, not_applicable, true or false, got {value!r}")


def _verdict(value: Answer, call: LLMCall) -> tuple[str, str]:
    if callable(value):
        value = value(call)
        if isinstance(value, tuple):
            return _as_verdict(value[0], "answer"), str(value[1])
    return _as_verdict(value, "answer"), _REASON


def _verdict_answer(value: Answer, call: LLMCall) -> dict[str, Any]:
    if callable(value):
        result = value(call)
        if isinstance(result, dict):
            return result
        value = result
    verdict, reason = _verdict(value, call)
    return {"verdict": verdict, "reasoning": reason}


# -- the YAML (or JSON) script ------------------------------------------------------------------------


class _UserLine(BaseModel):
    """A simulated user's line that attaches files: ``{message: "here", files: ["receipt.jpg"]}``."""

    model_config = ConfigDict(extra="forbid")
    message: str
    files: list[str] = Field(default_factory=list)


class _UserScript(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lines: list[str | _UserLine]
    then: str = "Thanks, that's all."


class _AgentScript(BaseModel):
    model_config = ConfigDict(extra="forbid")
    replies: list[str | dict[str, Any]]
    then: str | None = None


class _Script(BaseModel):
    """The vocabulary of a script file: the same words as the :class:`FakeLLM` methods."""

    model_config = ConfigDict(extra="forbid")
    simulated_user: list[str | _UserLine] | _UserScript | None = None
    verdicts: dict[str, str | bool] = Field(default_factory=dict)
    intents: dict[str, str | bool] = Field(default_factory=dict)
    goal_achieved: str | bool | None = None
    topic: str | list[str] | None = None
    grounded: bool | str | dict[str, str | bool] | None = None
    text: str | None = None
    agent_model: list[str | dict[str, Any]] | _AgentScript | None = None
    tools: dict[str, Any] = Field(default_factory=dict)
    extract: dict[str, str | None] = Field(default_factory=dict)


def load_fake_llm(spec: str | PathLike[str], *, root: Path | None = None, where: str = "--fabtest-fake-llm") -> Any:
    """The fake named by ``--fabtest-fake-llm``: a script file (``.yaml``/``.yml``/``.json``, relative to
    ``root``) or ``module:attr`` (a :class:`FakeLLM`, any LLM object, or a function returning one).
    Raises :class:`UsageError` (one line naming the file and key) for a bad script."""
    text = str(spec)
    path = Path(text)
    if root is not None and not path.is_absolute():
        path = root / path
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.is_file():
        return _from_file(path, where)
    if ":" in text:
        from fabtest.llm.factory import load_llm_object

        return load_llm_object(text, where="--fabtest-fake-llm")
    raise UsageError(f"--fabtest-fake-llm {text}: expected a script file (.yaml, .yml, .json) or module:attr")


def _from_file(path: Path, where: str) -> FakeLLM:
    if not path.is_file():
        raise UsageError(f"{where}: {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping with keys like simulated_user, verdicts, topic, goal_achieved")
    try:
        script = _Script.model_validate(data)
        fake = _build(script)
        fake.source = str(path)
        return fake
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("list[", "str", "bool", "dict[", "_")))
        message = f"{where}: {err['msg']}"
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(where, list(_Script.model_fields), n=1) if "." not in where else []
            message = f"unknown key {where!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
        raise UsageError(f"{path}: {message}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _build(script: _Script) -> FakeLLM:
    fake = FakeLLM()
    if isinstance(script.simulated_user, _UserScript):
        fake.simulated_user(_lines(script.simulated_user.lines), then=script.simulated_user.then)
    elif script.simulated_user is not None:
        fake.simulated_user(_lines(script.simulated_user))
    if script.verdicts:
        verdicts = dict(script.verdicts)
        fake.verdicts({k: v for k, v in verdicts.items() if k != "default"}, default=verdicts.get("default"))
    if script.intents:
        intents = dict(script.intents)
        fake.intents({k: v for k, v in intents.items() if k != "default"}, default=intents.get("default"))
    if script.goal_achieved is not None:
        fake.goal_achieved(script.goal_achieved)
    if script.topic is not None:
        fake.topic(*([script.topic] if isinstance(script.topic, str) else script.topic))
    if isinstance(script.grounded, dict):
        grounded = dict(script.grounded)
        fake.grounded({k: v for k, v in grounded.items() if k != "default"}, default=grounded.get("default"))
    elif script.grounded is not None:
        fake.grounded(default=script.grounded)
    if script.text is not None:
        fake.text(script.text)
    if script.tools:
        fake.tool_results(script.tools)
    if script.extract:
        fake.extractions(script.extract)
    if isinstance(script.agent_model, _AgentScript):
        fake.agent_model(script.agent_model.replies, then=script.agent_model.then)
    elif script.agent_model is not None:
        fake.agent_model(script.agent_model)
    return fake


def _lines(lines: Sequence[str | _UserLine]) -> list[str | dict[str, Any]]:
    return [line if isinstance(line, str) else line.model_dump() for line in lines]
