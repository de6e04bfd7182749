"""``fabtest calibrate``: kappa against published worked examples, and the command end to end
through the real google-genai client against FakeGemini (a judge scripted to pass "warm" replies)."""

from __future__ import annotations

import itertools
import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabtest.cli import main
from fabtest.judging.agreement import cohen_kappa, confusion_matrix
from fabtest.testing import FakeGemini


def _pairs(cells: dict[tuple[str, str], int]) -> tuple[list[str], list[str]]:
    a: list[str] = []
    b: list[str] = []
    for (x, y), n in cells.items():
        a += [x] * n
        b += [y] * n
    return a, b


@pytest.mark.parametrize(("cells", "expected"), [
    # Wikipedia "Cohen's kappa", simple example: 50 grant proposals, 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no
    ({("y", "y"): 20, ("y", "n"): 5, ("n", "y"): 10, ("n", "n"): 15}, 0.4),
    # Wikipedia, "same percentages but different numbers": 45/15/25/15 → 0.1304 and 25/35/5/35 → 0.2593
    ({("y", "y"): 45, ("y", "n"): 15, ("n", "y"): 25, ("n", "n"): 15}, 0.1304),
    ({("y", "y"): 25, ("y", "n"): 35, ("n", "y"): 5, ("n", "n"): 35}, 0.2593),
])
def test_kappa_matches_published_worked_examples(cells: dict[tuple[str, str], int], expected: float) -> None:
    a, b = _pairs(cells)
    assert cohen_kappa(a, b) == pytest.approx(expected, abs=1e-4)


def test_kappa_edges_and_confusion() -> None:
    assert cohen_kappa(["p", "f"], ["p", "f"]) == 1.0
    assert cohen_kappa(["p", "p"], ["p", "p"]) is None  # one label only: chance agreement is 1
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["p", "f"], ["f", "p"]) == -1.0
    assert confusion_matrix(["p", "p", "f"], ["p", "f", "f"], ["p", "f"]) == [[1, 1], [0, 1]]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.chdir(tmp_path)
        (tmp_path / "pyproject.toml").write_text(
            '[tool.fabtest]\nllm_cache = "on"\n[tool.fabtest.criteria]\nfriendly = "The reply is warm"\n'
            '[tool.fabtest.judge]\nbackoff = 0.01\nmax_retries = 1\ntimeout = 5\n')
        yield server


def warm_judge(fake: FakeGemini, flip_every: int = 0) -> None:
    """Passes a reply that says "warm"; with ``flip_every`` N, every Nth answer is reversed."""
    counter = itertools.count(1)

    def answer(request: Any) -> dict[str, Any]:
        subject = request.text.split("<<<", 1)[1].split(">>>", 1)[0]
        name = re.search(r"1\. name: (.*)", request.text).group(1).strip()  # type: ignore[union-attr]
        ok = "warm" in subject.lower()
        if flip_every and next(counter) % flip_every == 0:
            ok = not ok
        return {"verdicts": [{"criterion": name, "verdict": "passed" if ok else "failed", "reasoning": "scripted"}]}

    fake.add_rule(r"Evaluate the ", callback=answer)


LABELLED = """
examples:
  - {criterion: friendly, response: "A warm hello to you!", verdict: passed}
  - {criterion: friendly, response: "Warm regards.", verdict: good}
  - {criterion: friendly, response: "Go away.", verdict: failed}
  - {criterion: friendly, response: "Whatever.", verdict: passed}     # the judge disagrees here
  - criterion: polite conversation
    description: The agent stays polite throughout
    scope: conversation
    transcript: [{user: Hi, agent: "A warm welcome"}, {user: Thanks, agent: "Warmly, bye"}]
    verdict: passed
"""


def calibrate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(["calibrate", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--format" in args and out else out), err


def test_calibrate_reports_accuracy_kappa_and_disagreements(fake: FakeGemini, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    warm_judge(fake)
    (tmp_path / "labels.yaml").write_text(LABELLED)
    code, report, _ = calibrate(capsys, "labels.yaml", "--format", "json")
    assert code == 0
    overall = report["overall"]
    # human: P P F P P ; judge: P P F F P → 4/5 agree; pe = (4/5*3/5 + 1/5*2/5) = 0.56 → kappa (0.8-0.56)/0.44
    assert overall["accuracy"] == 0.8
    assert overall["kappa"] == pytest.approx(0.24 / 0.44, abs=1e-4)
    assert overall["confusion"]["matrix"] == [[3, 1, 0], [0, 1, 0]]
    [miss] = report["criteria"]["friendly"]["disagreements"]
    assert miss["text"] == "Whatever." and miss["human"] == "passed" and miss["judge"] == "failed"
    assert "labels.yaml:examples[3]" in miss["source"]
    prompts = [r.text for r in fake.requests]
    assert any("description: The reply is warm" in p for p in prompts)  # from [tool.fabtest.criteria]
    assert any("CONVERSATION TRANSCRIPT" in p and "Agent: Warmly, bye" in p for p in prompts)
    code, text, err = calibrate(capsys, "labels.yaml", "--min-kappa", "0.7")
    assert code == 1 and "gate failed: kappa 0.55" in err
    assert "Disagreements (1)" in text and "'Whatever.'" in text


def test_calibrate_times_reports_self_agreement(fake: FakeGemini, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    warm_judge(fake, flip_every=3)  # every third answer is the opposite: 2-1 splits, majority still right
    (tmp_path / "labels.yaml").write_text(LABELLED)
    code, report, _ = calibrate(capsys, "labels.yaml", "--times", "3", "--format", "json")
    assert code == 0 and len(fake.requests) == 15
    assert report["overall"]["self_agreement"] == pytest.approx(2 / 3, abs=1e-3)
    assert report["overall"]["accuracy"] == 0.8


def test_calibrate_from_features_leaves_each_example_out(fake: FakeGemini, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    warm_judge(fake)
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "a.feature").write_text(textwrap.dedent('''
        Feature: A
          Background:
            Given the criterion "friendly" means "The reply is warm" with examples:
              | example            | verdict |
              | A warm welcome!    | good    |
              | Go away.           | bad     |
            And the criterion "kind" means:
              """
              The agent is kind
              Good: "So warm of you"
              Bad: Leave me alone
              """
          Scenario: S
            When the user says "hi"
    '''))
    code, report, _ = calibrate(capsys, "--from-features", "--format", "json")
    assert code == 0
    assert {n: e["examples"] for n, e in report["criteria"].items()} == {"friendly": 2, "kind": 2}
    assert report["overall"]["accuracy"] == 1.0 and report["overall"]["kappa"] == 1.0
    first = next(r.text for r in fake.requests if "A warm welcome!" in r.text.split("<<<", 1)[1])
    assert "example that PASSES: A warm welcome!" not in first  # leave-one-out
    assert "example that FAILS: Go away." in first


@pytest.mark.parametrize(("content", "args", "message"), [
    ("examples:\n  - {criterion: friendly, response: hi}\n", [], "examples[0].verdict: Field required"),
    ("examples:\n  - {criterion: friendly, response: hi, verdict: maybe}\n", [], "verdict must be passed or failed"),
    ("examples:\n  - {criterion: x, scope: conversation, verdict: passed}\n", [], "needs 'transcript:'"),
    ("examples: []\n", [], "examples"),
    ("- 1\n", [], "expected a mapping"),
    ("examples:\n  - {criterion: x, response: hi, verdict: passed}\n", ["--min-kappa", "3"], "--min-kappa"),
    ("examples:\n  - {criterion: frendly, response: hi, verdict: passed}\n", [],
     "examples[0].criterion: 'frendly' is not declared (did you mean 'friendly'?)"),
    ("examples:\n  - {criterion: rude, response: hi, verdict: passed}\n", [],
     "examples[0].criterion: 'rude' is not declared (declared: friendly)"),
])
def test_calibrate_bad_input_is_one_line(fake: FakeGemini, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         content: str, args: list[str], message: str) -> None:
    (tmp_path / "labels.yaml").write_text(content)
    code, _, err = calibrate(capsys, "labels.yaml", *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert fake.requests == []


def test_calibrate_imports_the_projects_offline_llm_from_the_project_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`offline_llm = "shopfakes:judge"` is a module of the project: `fabtest calibrate` / `rejudge`
    import it from the project root like pytest and `fabtest run` do, without PYTHONPATH=."""
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".", str(tmp_path))])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stranger_shopfakes.py").write_text(
        "from fabtest.testing import FakeLLM\n\ndef judge():\n    return FakeLLM().verdicts(default='passed')\n")
    (tmp_path / "pyproject.toml").write_text('[tool.fabtest]\noffline_llm = "stranger_shopfakes:judge"\n')
    (tmp_path / "labels.yaml").write_text("criteria: {friendly: The reply is warm}\n"
                                          "examples:\n  - {criterion: friendly, response: Hi!, verdict: passed}\n")
    code, out, err = calibrate(capsys, "labels.yaml")
    assert code == 0, err
    assert "does not import" not in err and "friendly" in out
    monkeypatch.delitem(__import__("sys").modules, "stranger_shopfakes", raising=False)


def test_a_conversation_label_with_a_goal_is_judged_with_the_goal_prompt(fake: FakeGemini, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A label on a whole run made in ``fabtest view`` (``kind: conversation``, issue 31 point 4):
    with the simulated user's goal, calibrate asks the judgement a run asks for ``the goal must be
    achieved`` (the goal prompt, over the transcript as a run shows it) and compares its verdict
    with the person's; without a goal it is a conversation criterion like any other."""
    def goal(request: Any) -> dict[str, Any]:
        done = "booked" in request.text.split("<<<", 1)[1].lower()
        return {"reasoning": "scripted", "verdict": "passed" if done else "failed"}

    fake.add_rule(r"A user talked to an agent with this goal", callback=goal)
    warm_judge(fake)
    (tmp_path / "exp_1.labels.yaml").write_text("""
examples:
- kind: conversation
  criterion: goal achieved
  goal: book a loft in Berlin
  verdict: failed
  scope: conversation
  transcript: [{user: "A loft in Berlin please", agent: "I will look into it"}]
  judge: passed
  comment: it never booked anything
  scenario: "example:abc"
  iteration: 2
- kind: conversation
  criterion: goal achieved
  goal: book a loft in Berlin
  verdict: passed
  scope: conversation
  transcript: [{user: "A loft in Berlin please", agent: "Booked: the Loft, Friday"}]
  judge: passed
- kind: conversation
  criterion: scenario outcome
  description: The agent does what the scenario 'Greeting' expects
  verdict: passed
  scope: conversation
  transcript: [{user: Hi, agent: "A warm welcome"}]
  judge: passed
""")
    code, report, _ = calibrate(capsys, "exp_1.labels.yaml", "--format", "json")
    assert code == 0, report
    assert report["criteria"]["goal achieved"]["accuracy"] == 1.0  # the goal prompt agreed with both people
    assert report["overall"]["examples"] == 3 and report["overall"]["accuracy"] == 1.0
    goal_prompts = [r.text for r in fake.requests if "A user talked to an agent with this goal" in r.text]
    assert len(goal_prompts) == 2 and all("GOAL: book a loft in Berlin" in p for p in goal_prompts)
    assert "I will look into it" in goal_prompts[0]  # the transcript, in the run's judge format
    assert any("The agent does what the scenario 'Greeting' expects" in r.text for r in fake.requests)


def test_a_goal_on_a_single_response_is_refused(fake: FakeGemini, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "labels.yaml").write_text(
        "examples:\n- {criterion: goal achieved, goal: book a loft, response: ok, verdict: passed}\n")
    code, _, err = calibrate(capsys, "labels.yaml")
    assert code == 2 and "examples[0].goal: a goal is judged over a whole conversation" in err
    assert fake.requests == []
