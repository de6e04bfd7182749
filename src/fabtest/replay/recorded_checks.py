"""The recorded checks of a scenario, brought up to date on its replayed conversation.

A check whose subject did not change (its turn and every turn before it, or the whole transcript
for a conversation check, is the same text and the same tool calls as recorded) keeps its verdict: asking the judge
again about the same text measures the judge, which is ``fabtest rejudge``'s job, not replay's.
A check whose subject changed is asked again: ``satisfy`` criteria through the judge exactly as
``rejudge`` asks them (same criterion, batched per turn and scope), the goal, intents and grounding
through the judge as the engine asks them, and the deterministic checks whose arguments the record
holds (regex match, a call of a turn with its ``with:`` rows, a call anywhere in the conversation, the
order, count and set of calls, topics reached or followed, the turn limit, transcript text) by running
them. Anything else (a turn's call recorded before its ``with:`` rows were, files, a topic's turn limit)
cannot be re-run from the record and is ``skipped``
with the reason, so a verdict is never carried over to text it was not given about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from fabtest.conversation import Conversation, Turn
from fabtest.engine import checks, handoffs, trajectory, transcript
from fabtest.engine.judge import Judge
from fabtest.engine.topics import follows, reached
from fabtest.errors import FailureType, UsageError
from fabtest.experiment.fingerprint import canonical_json
from fabtest.experiment.model import CheckRecord, ScenarioResult, TurnRecord
from fabtest.judging.rejudge import recorded_criterion

__all__ = ["JUDGED_ONE_BY_ONE", "REJUDGED", "calls_of", "outcome_of", "recheck", "same_turn"]

Status = Literal["passed", "failed", "inconclusive", "not_applicable", "skipped"]

#: the judged check types :func:`recheck` asks one call each (``satisfy`` is asked in batches)
JUDGED_ONE_BY_ONE = ("goal", "intent", "grounded_in")
#: every check type :func:`recheck` sends to the judge
REJUDGED = ("satisfy", *JUDGED_ONE_BY_ONE)


def _norm(text: str) -> str:
    return " ".join(text.split())


def calls_of(turn: TurnRecord | Turn) -> list[str]:
    """A turn's tool calls as sorted ``name + canonical arguments`` (results and order left out)."""
    calls = turn.tool_calls
    return sorted(f"{c.name}{canonical_json(c.arguments)}" for c in calls)


def same_turn(recorded: TurnRecord, turn: Turn) -> bool:
    """The exact subject of a turn check: user and agent text (whitespace aside) and tool calls."""
    return (_norm(recorded.user) == _norm(turn.user) and _norm(recorded.agent) == _norm(turn.response.text)
            and calls_of(recorded) == calls_of(turn))


def _set(check: CheckRecord, status: Status, details: str, how: str) -> None:
    check.data = {**check.data, "recorded": check.status, "replay": how}
    check.status = status
    check.passed = None if status in ("inconclusive", "not_applicable", "skipped") else status == "passed"
    check.details = details


def recheck(result: ScenarioResult, recorded: Sequence[TurnRecord], conversation: Conversation, judge: Judge | None,
            *, judge_reason: str = "", stopped_at: int | None = None, changed_from: int | None = None,
            max_file_bytes: int = transcript.JUDGE_MAX_FILE_BYTES) -> None:
    """Update ``result``'s checks (a copy of the recorded ones) for ``conversation``. ``stopped_at``:
    the turn where ``--no-continue`` stopped, after which the conversation is unknown. ``changed_from``:
    a turn known to differ even where :func:`same_turn` sees none (``fabtest mutate`` reordering two
    calls, which :func:`calls_of` compares as a set). ``max_file_bytes``: ``judge_max_file_bytes``,
    over which the judge is shown a file's name, type and size only, as a run shows it."""
    turns = conversation.turns
    unchanged: set[int] = set()  # the turns before the first difference (later ones follow a changed past)
    for number, (old, new) in enumerate(zip(recorded, turns, strict=False), start=1):
        if not same_turn(old, new) or (changed_from is not None and number >= changed_from):
            break
        unchanged.add(number)
    whole_same = len(recorded) == len(turns) and len(unchanged) == len(turns)
    batches: dict[tuple[str, int | None], list[CheckRecord]] = {}
    for check in [*result.evaluations, *result.expectations]:
        if (check.turn in unchanged) if check.turn is not None else whole_same:
            check.data = {**check.data, "replay": "kept"}
            continue
        if check.turn is not None and check.turn > len(turns):
            _set(check, "skipped", f"turn {check.turn} did not happen in the replay", "not rechecked")
        elif check.turn is None and stopped_at is not None:
            _set(check, "skipped", f"the replay stopped at turn {stopped_at} (--no-continue)", "not rechecked")
        elif check.type == "satisfy" and check.data.get("scope") in ("response", "conversation"):
            scope = str(check.data["scope"])
            batches.setdefault((scope, check.turn if scope == "response" else None), []).append(check)
        elif check.type in JUDGED_ONE_BY_ONE:
            _judge_one(result, check, conversation, judge, judge_reason, max_file_bytes)
        else:
            _run_deterministic(check, conversation)
    for (scope, turn), group in batches.items():
        _judge_batch(result, group, conversation, scope, turn, judge, judge_reason, max_file_bytes)


def _judge_batch(result: ScenarioResult, group: list[CheckRecord], conversation: Conversation, scope: str,
                 turn: int | None, judge: Judge | None, judge_reason: str, max_file_bytes: int) -> None:
    if judge is None:
        for check in group:
            _set(check, "skipped", f"no judge LLM: {judge_reason}", "not rechecked")
        return
    unique = {c.criterion: recorded_criterion(result, c) for c in group}
    subject = (transcript.exchange_for_judge(conversation, turn, max_file_bytes=max_file_bytes) if turn
               else transcript.for_judge(conversation, max_file_bytes=max_file_bytes))
    answer = judge.evaluate_criteria(list(unique.values()), subject=subject,
                                     scope="response" if scope == "response" else "conversation")
    conversation.add_usage("judge", answer.usage)
    by_name = {v.criterion: v for v in answer.value}
    for check in group:
        verdict = by_name[check.criterion]
        _set(check, verdict.verdict, verdict.reasoning, "rechecked")
        check.data.update(verdict.sample_data())


def _judge_one(result: ScenarioResult, check: CheckRecord, conversation: Conversation, judge: Judge | None,
               judge_reason: str, max_file_bytes: int) -> None:
    """The goal, an intent or grounding, asked again as the engine asks it."""
    if judge is None:
        _set(check, "skipped", f"no judge LLM: {judge_reason}", "not rechecked")
        return
    if check.type == "goal":
        goal = check.data.get("goal") or (result.simulator or {}).get("goal")
        if not goal:
            _set(check, "skipped", "no goal recorded", "not rechecked")
            return
        answer = judge.goal_achieved(str(goal), transcript.for_judge(conversation, max_file_bytes=max_file_bytes))
        conversation.add_usage("judge", answer.usage)
        _set(check, answer.value.verdict, answer.value.reasoning, "rechecked")
        return
    turn = conversation.turns[(check.turn or len(conversation.turns)) - 1]
    if check.type == "intent":
        verdict = judge.intent(transcript.exchange_for_judge(conversation, turn.number, max_file_bytes=max_file_bytes),
                               check.criterion.removeprefix("intent:"))
        conversation.add_usage("judge", verdict.usage)
        _set(check, verdict.value.verdict, verdict.value.reasoning, "rechecked")
        return
    source = str(check.data.get("source") or check.criterion.removeprefix("grounded_in:"))
    calls = [c for t in conversation.turns[: turn.number] for c in t.tool_calls if c.name == source]
    grounding = judge.grounding(turn.response.text, source, calls, turn=turn)
    conversation.add_usage("judge", grounding.usage)
    found = grounding.value
    details = found.reasoning or ("unsupported claims: " + "; ".join(found.unsupported) if found.unsupported
                                  else "every claim is supported")
    _set(check, found.verdict, details, "rechecked")
    check.data.update({**found.to_data(), "claims_total": len(found.claims),
                       "claims_unsupported": len(found.unsupported)})


def _run_deterministic(check: CheckRecord, conversation: Conversation) -> None:
    """The checks whose arguments the record holds; the rest are skipped with the reason."""
    outcome = _deterministic(check, conversation)
    if outcome is None:
        _set(check, "skipped", f"not re-checked by replay: a {check.type!r} check cannot be re-run from the record",
             "not rechecked")
        return
    passed, details = outcome
    _set(check, "passed" if passed else "failed", details, "rechecked")


def _deterministic(check: CheckRecord, conversation: Conversation) -> checks.Result | None:
    kind, label, data = check.type, check.criterion, check.data
    negated = kind.startswith("not_")
    if kind in ("match", "not_match") and label.startswith(f"{kind}:/") and label.endswith("/") and check.turn:
        try:
            regex = checks.compile_regex(label[len(kind) + 2:-1], where=label)
        except UsageError:
            return None
        passed, details = checks.check_regex(conversation.turns[check.turn - 1].response.text, regex)
        return passed != negated, details
    if kind in ("include_call", "not_include_call") and isinstance(data.get("tool"), str):
        passed, details = checks.check_called(conversation.tool_calls, data["tool"])
        return passed != negated, details
    if kind in ("call_tool", "not_call_tool") and check.turn and isinstance(data.get("tool"), str) \
            and isinstance(data.get("with"), list):  # a turn's call, its `with:` rows recorded (older files: not)
        try:
            args = [checks.ArgExpectation.parse(str(name), str(value), where=label) for name, value in data["with"]]
        except (UsageError, ValueError):
            return None
        passed, details = checks.check_called(conversation.turns[check.turn - 1].tool_calls, data["tool"], args)
        return passed != negated, details
    if kind == "call_tool" and check.turn is None and data.get("source") == "verification":
        return checks.check_called(conversation.tool_calls, str(data.get("tool")))  # a scenario set's verification
    if kind in (handoffs.KIND, handoffs.NOT_KIND):  # the handoff events of one turn or of the conversation
        return handoffs.evaluate(kind, data, [conversation.turns[check.turn - 1]] if check.turn else conversation.turns)
    if kind in trajectory.KINDS:  # the order, count or set of calls, of one turn or of the conversation
        scoped = conversation.turns[check.turn - 1].tool_calls if check.turn else conversation.tool_calls
        return trajectory.evaluate(kind, data, scoped)
    if kind == "reached_topic" and isinstance(data.get("topic"), str):
        path = conversation.topic_path
        return reached(data["topic"], path), f"topic path: {' > '.join(path) or '(none)'}"
    if kind == "follow_topics" and isinstance(data.get("sequence"), list):
        path, jumps = conversation.topic_path, conversation.off_graph_transitions
        details = f"topic path: {' > '.join(path) or '(none)'}"
        if jumps:
            details += f"; off-graph transition(s), not allowed by the topics' next column: {', '.join(jumps)}"
        return follows([str(t) for t in data["sequence"]], path) and not jumps, details
    if kind == "turn_count" and isinstance(data.get("max"), int):
        actual = len(conversation.turns)
        check.data = {**data, "actual": actual}
        return actual <= data["max"], f"{actual} turn{'' if actual == 1 else 's'} (max {data['max']})"
    if kind == "transcript_contains" and label.startswith("transcript:"):
        text = label[len("transcript:"):]
        ok = text in conversation.transcript()
        return ok, f"transcript {'contains' if ok else 'does not contain'} {text!r}"
    return None


def outcome_of(result: ScenarioResult) -> tuple[bool, FailureType | None, str | None]:
    """passed, failure type and message from the re-checked hard expectations."""
    broken = [c for c in result.expectations if c.status in ("failed", "inconclusive")]
    if not broken:
        return True, None, None
    first = broken[0]
    where = f"turn {first.turn}" if first.turn else "the conversation"
    return False, "assertion", (f'replayed: {first.type} "{first.criterion}" (must) is {first.status} '
                                f'at {where}: {first.details}')

