"""The progress display: the model's numbers, the live line's screen, and real runs (issue 17 item 4).

The live line is checked by what ends up on the screen: the bytes written (to a StringIO, or to a
pseudo-terminal by a real pytest) are replayed through a tiny terminal model (carriage return,
newline, erase line, cursor up), and the final screen must be what pytest alone would leave.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.plugin.conftest import Project

from fabtest.experiment.cost import price_table
from fabtest.experiment.progress import Progress, format_duration, render
from fabtest.llm import limits, shared_limit
from fabtest.pytest_plugin.live_line import LiveLine
from fabtest.pytest_plugin.progress import choose_mode
from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import FakeRequest

_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: the lines, trailing blanks dropped (no wrapping)."""
    lines: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(raw):
        ch = raw[i]
        m = _CSI.match(raw, i)
        if m:
            arg, op = m.group(1), m.group(2)
            if op == "K":
                del lines[row][col:]
            elif op == "A":
                row = max(0, row - int(arg or 1))
            i = m.end()
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            while len(lines) <= row:
                lines.append([])
        else:
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        i += 1
    text = ["".join(line).rstrip() for line in lines]
    while text and not text[-1]:
        text.pop()
    return text


# -- the model -----------------------------------------------------------------------------------
def test_progress_counts_running_done_failed_once_and_estimates_what_is_left() -> None:
    p = Progress(started_at=100.0, total=4)
    p.start("a", 101.0)
    p.start("b", 101.0)
    assert p.snapshot(102.0).running == 2 and p.left_s(102.0) is None  # nothing finished: no estimate
    p.failed_phase("a")
    p.failed_phase("a")  # call and teardown both failed: one failed test
    p.finish("a")
    p.finish("a")  # a second finish of the same test is not a second test done
    snap = p.snapshot(111.0, llm_in_flight=3)
    assert (snap.done, snap.failed, snap.running, snap.llm_in_flight) == (1, 1, 1, 3)
    assert snap.elapsed_s == 11.0
    assert snap.left_s == pytest.approx(30.0)  # 1 done in 10 s since the first start: 3 left take 30 s
    line = render(snap)
    assert line.startswith("fabtest 1/4 done, 1 failed, 1 running, 3 LLM calls in flight")
    assert "0:11 elapsed" in line and "~0:30 left" in line


def test_progress_sums_tokens_and_prices_them_per_role_model() -> None:
    prices = price_table({"judge-model": {"input": 1.0, "output": 2.0}})
    p = Progress(started_at=0.0, prices=prices, role_models={"judge": "judge-model", "simulator": "nobody-knows"})
    p.add_result({"id": "x", "name": "s", "passed": True,
                  "usage": {"judge": {"calls": 2, "input_tokens": 1_000_000, "output_tokens": 500_000}}})
    snap = p.snapshot(1.0)
    assert snap.tokens == 1_500_000 and snap.usd == pytest.approx(2.0) and snap.cost_complete
    p.add_result({"id": "y", "name": "t", "passed": True,
                  "usage": {"simulator": {"calls": 1, "input_tokens": 10, "output_tokens": 5}}})
    snap = p.snapshot(1.0)
    assert snap.tokens == 1_500_015 and not snap.cost_complete  # the simulator's model has no price
    assert "1.5M tokens, $2.0000 (some tokens unpriced)" in render(snap)


def test_durations_and_an_unknown_total_render_plainly() -> None:
    assert [format_duration(s) for s in (0.4, 42, 725, 3725)] == ["0:00", "0:42", "12:05", "1:02:05"]
    line = render(Progress(started_at=0.0).snapshot(5.0))
    assert line.startswith("fabtest 0/? done") and "LLM" not in line and "left" not in line


@pytest.mark.parametrize(("asked", "tty", "capture", "term", "mode"), [
    ("auto", True, "fd", "xterm", "live"),
    ("auto", True, "no", "xterm", "lines"),  # -s: a test's prints would land on the status line
    ("auto", True, "tee-sys", "xterm", "lines"),
    ("auto", True, "fd", "dumb", "lines"),
    ("auto", False, "fd", "xterm", "lines"),  # CI logs
    ("off", True, "fd", "xterm", "off"),
    ("live", False, "no", None, "live"),
])
def test_the_mode_follows_the_terminal_and_the_capture(asked: str, tty: bool, capture: str, term: str | None,
                                                       mode: str) -> None:
    assert choose_mode(asked, tty=tty, capture=capture, term=term) == mode


# -- LLM calls in flight -----------------------------------------------------------------------------
def test_calls_in_flight_count_this_process_and_a_shared_pool(tmp_path: Path) -> None:
    sem = limits.provider_semaphore("gemini", "http://127.0.0.1:9/progress-test", 4)
    before = limits.calls_in_flight()
    with sem:
        with sem:
            assert limits.calls_in_flight() == before + 2
    assert limits.calls_in_flight() == before
    a = shared_limit.SharedSemaphore(shared_limit.slot_dir(tmp_path, "gemini", "http://a"), 3)
    b = shared_limit.SharedSemaphore(shared_limit.slot_dir(tmp_path, "gemini", "http://b"), 2)
    try:
        assert a.acquire() and a.acquire() and b.acquire()
        assert (a.held, b.held) == (2, 1)
        assert shared_limit.busy_slots(tmp_path) == 3  # what the xdist controller reads: every process's
        a.release()
        assert shared_limit.busy_slots(tmp_path) == 2 and a.acquire(blocking=False)  # the probe left no lock
        a.release()
        a.release()
        b.release()
        assert shared_limit.busy_slots(tmp_path) == 0
    finally:
        a.close()
        b.close()


# -- the live line -------------------------------------------------------------------------------------
def test_the_live_line_leaves_pytest_text_as_it_was() -> None:
    out = io.StringIO()
    line = LiveLine(out, columns=lambda: 100)
    line.write("features/a.feature ")
    line.show("fabtest 0/3 done")
    assert screen(out.getvalue())[-1] == "fabtest 0/3 done"  # below pytest's partial line
    line.write(".")
    line.flush()
    line.show("fabtest 1/3 done")
    line.write("F.")
    line.write("   [100%]\n")
    line.flush()
    line.show("fabtest 3/3 done")
    assert screen(out.getvalue()) == ["features/a.feature .F.   [100%]", "fabtest 3/3 done"]
    line.write("\x1b[32m2 passed\x1b[0m\n")  # colour codes take no column
    line.clear()
    assert screen(out.getvalue()) == ["features/a.feature .F.   [100%]", "\x1b[32m2 passed\x1b[0m".replace(
        "\x1b[32m", "").replace("\x1b[0m", "")]


def test_a_plain_line_ends_pytest_partial_line_first() -> None:
    out = io.StringIO()
    line = LiveLine(out)
    line.write("..")
    line.print_line("fabtest 2/9 done")
    line.write(".")
    assert out.getvalue() == "..\nfabtest 2/9 done\n."


def test_the_display_thread_never_writes_inside_pytest_text() -> None:
    out = io.StringIO()
    line = LiveLine(out, columns=lambda: 200)
    stop = threading.Event()

    def tick() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            line.show(f"fabtest {n} done")

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        for i in range(300):
            line.write("x" * (i % 7) + ("\n" if i % 5 == 4 else ""))
            line.flush()
    finally:
        stop.set()
        thread.join()
    line.clear()
    assert screen(out.getvalue()) == screen("".join("x" * (i % 7) + ("\n" if i % 5 == 4 else "") for i in range(300)))


# -- real runs ---------------------------------------------------------------------------------------------
SLOW_AGENT = """
import time
from fabtest import AgentResponse


def build(context):
    def chat(messages):
        time.sleep(0.25)
        return AgentResponse(text="hello there")
    return chat
"""

FEATURE = """
Feature: Progress
  Scenario: One
    When the user says "hi"
    Then the response must not match "xyzzy"

  Scenario: Two
    When the user says "hi"
    Then the response must match "xyzzy"

  Scenario: Three
    When the user says "hi"
    Then the response must not match "xyzzy"
"""


@pytest.fixture
def slow_project(pytester: pytest.Pytester) -> Project:
    project = Project(pytester)
    project.pyproject()
    project.agent(SLOW_AGENT)
    project.feature("features/progress.feature", FEATURE)
    return project


def test_logs_get_plain_periodic_lines_and_the_last_one_adds_up(slow_project: Project) -> None:
    result = slow_project.pytester.runpytest(*slow_project.args("-q", "--fabtest-progress-every", "0.1"))
    result.assert_outcomes(passed=2, failed=1)
    lines = [ln for ln in result.outlines if ln.startswith("fabtest ") and " done, " in ln]
    assert len(lines) >= 3, result.outlines  # about 0.8 s of scenarios, a line every 0.1 s
    assert any("1 running" in ln for ln in lines)
    assert lines[-1].startswith("fabtest 3/3 done, 1 failed, 0 running, 0 LLM calls in flight")
    letters = [re.sub(r"\s*\[\s*\d+%\]$", "", ln) for ln in result.outlines
               if re.fullmatch(r"[.F]+(\s+\[\s*\d+%\])?", ln)]
    assert "".join(letters) == ".F."  # pytest's letters, in order (a progress line may come between them)


def test_off_and_short_runs_print_nothing(slow_project: Project) -> None:
    off = slow_project.pytester.runpytest(*slow_project.args("-q", "--fabtest-progress", "off",
                                                              "--fabtest-progress-every", "0.1"))
    short = slow_project.pytester.runpytest(*slow_project.args("-q"))  # 30 s by default: nothing in a 1 s run
    for result in (off, short):
        result.assert_outcomes(passed=2, failed=1)
        assert not [ln for ln in result.outlines if ln.startswith("fabtest ") and " done, " in ln]
        assert result.outlines[0].startswith(".F.")  # pytest's own progress, untouched


def test_the_status_line_stays_out_of_a_scenario_captured_output(slow_project: Project) -> None:
    """The display writes while scenarios run, when pytest points the output at its capture."""
    result = slow_project.pytester.runpytest_subprocess(*slow_project.args("-q", "-rA", "--fabtest-progress-every",
                                                                           "0.05", "-p", "no:xdist"))
    result.assert_outcomes(passed=2, failed=1)
    output = "\n".join(result.outlines)
    assert "Captured stdout" not in output  # the scenarios print nothing; a status line in there would be ours
    assert "fabtest 3/3 done" in output


def test_llm_calls_in_flight_are_shown_while_the_judge_thinks(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(request: FakeRequest) -> Any:
        time.sleep(0.4)
        from fabtest.demo.offline_llm import answer

        return answer(request)

    project = Project(pytester)
    project.pyproject('agent = "fabtest.demo:build_agent"\n[tool.fabtest.judge]\nbackoff = 0.01')
    project.feature("features/judged.feature", """
        Feature: Judged
          Scenario: Friendly
            Given a simulated user with the goal "Book a room for 10 people in Berlin"
            And the simulation takes at most 2 turns
            When the simulated user talks to the agent
        """)
    with FakeGemini(handler=slow) as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        result = pytester.runpytest(*project.args("-q", "--fabtest-progress-every", "0.05", "--fabtest-no-preflight"))
    shown = [int(m.group(1)) for ln in result.outlines if (m := re.search(r"(\d+) LLM calls? in flight", ln))]
    assert shown and max(shown) >= 1, result.outlines  # the simulator's calls, 0.4 s each
    tokens = [ln for ln in result.outlines if ln.startswith("fabtest 1/1 done")]
    assert tokens and not tokens[-1].count(" 0 tokens"), tokens  # the scenario's usage was counted


# -- a real terminal ----------------------------------------------------------------------------------------
def _run_in_pty(cwd: Path, args: list[str]) -> str:
    """Run pytest with a pseudo-terminal as its stdout and stderr; everything it wrote."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=30)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def _without_timing(lines: list[str]) -> list[str]:
    """The screen with colours, times, dates and experiment ids blanked (they differ between two runs)."""
    out = []
    for line in lines:
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        line = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "DATE", line)
        out.append(re.sub(r"exp_\w+", "exp", re.sub(r"\d+\.\d+s\b", "Xs", line)))
    return out


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
@pytest.mark.parametrize("verbosity", ["-q", "-v"])
def test_on_a_terminal_the_line_is_live_and_leaves_pytest_screen_intact(slow_project: Project,
                                                                        verbosity: str) -> None:
    args = [*slow_project.args(verbosity, "-p", "no:xdist", "--fabtest-no-results")]
    live = _run_in_pty(slow_project.path, args)
    plain = _run_in_pty(slow_project.path, [*args, "--fabtest-progress", "off"])
    assert "fabtest 1/3 done" in live or "fabtest 2/3 done" in live  # the line was drawn while it ran
    assert "\x1b[1A" in live or "\x1b[K" in live  # ... and redrawn in place
    assert "fabtest 1/3" not in plain
    assert _without_timing(screen(live)) == _without_timing(screen(plain))
