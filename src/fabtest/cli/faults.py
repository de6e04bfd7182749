"""``fabtest faults``: does each passing scenario still hold when one of its tools misbehaves?

The fault matrix: one ordinary run (the baseline), then, for every tool a passing scenario called
and every fault kind (:mod:`fabtest.engine.faults`), one pytest run of just the scenarios that
called that tool with ``--fabtest-fault TOOL=KIND`` (so at most tools x faults runs, each only as
large as it must be, ``--jobs`` of them at once). Each scenario x tool x fault is ``held`` (the
scenario still passed), ``broke`` (with the check that failed) or ``not injectable``: the agent
could not have that tool faulted (a handoff, a tool not decorated with ``@fabtest.tool``), which
says nothing of the agent and is left out of the coverage. The table is printed and
written to ``<results>/faults/<id>.faults.json`` and into the baseline experiment's JSON as its
``faults`` section; the runs' experiments go to ``<results>/faults/``, out of the experiments list.
The exit code says whether the faults coverage (tool x fault pairs that held) reached
``--min-coverage`` (default 1: every pair held); 2 for usage errors and for an agent whose tools no
fault can reach: told from the configured agents' adapters before any run, else found by the first
fault run, which runs alone (the others are not made). A tool found not injectable by its first
fault run is not run with the other kinds.

The pause faults ``approve`` and ``reject`` go over every tool a passing scenario's agent asked
approval for: each such scenario runs again with every approval of that tool decided so. A cell
whose decision the baseline already took on every approval of the tool is the baseline's own
outcome (``held``, no run). fabtest sends decisions itself, so a pause fault reaches every agent
that pauses; an agent whose tools no tool fault reaches is run with the pause faults alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest._internal.files import write_text_atomic
from fabtest.cli.common import results_dir_of
from fabtest.engine.faults import FAULTS, PAUSE_FAULTS
from fabtest.engine.stubbing import NOT_INJECTABLE, not_injectable
from fabtest.experiment.coverage import fault_coverage
from fabtest.experiment.reader import load_document
from fabtest.experiment.spool import write_experiment

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["KINDS", "add_faults_args", "register", "run_faults"]

#: every kind the matrix runs: the tool faults, then the pause faults
KINDS = [*FAULTS, *PAUSE_FAULTS]


def add_faults_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="features or folders to run (default: pytest's testpaths)")
    p.add_argument("--faults", default=",".join(KINDS), metavar="KINDS",
                   help=f"comma-separated fault kinds (default: all: {', '.join(KINDS)}; approve and reject decide "
                        "every approval the agent asks for the tool)")
    p.add_argument("--jobs", type=_jobs, default=2, metavar="N", help="fault runs at once (default 2)")
    p.add_argument("--pytest-arg", action="append", default=[], metavar="ARG",
                   help="one more argument for every pytest run (repeatable), e.g. --pytest-arg=--fabtest-fake-llm")
    p.add_argument("--results-dir", default=None,
                   help="where the experiments are (default: [tool.fabtest] results_dir)")
    p.add_argument("--min-coverage", type=_rate, default=1.0, metavar="RATE",
                   help="the share of tool x fault pairs that must hold, 0-1 or a percentage like 80%% "
                        "(default 1: exit 1 when any pair broke)")


def _jobs(text: str) -> int:
    """``--jobs``: 1 to 64 runs at once (0 or -1 ran one at a time, saying nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of runs at once, got {text!r}") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"expected 1 to 64 runs at once, got {value}")
    return value


def _rate(text: str) -> float:
    """``0.8`` or ``80%``: a share between 0 and 1."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share like 0.8 or 80%, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1 (or 0%-100%), got {text!r}")
    return value


def _pytest(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def run_faults(args: argparse.Namespace, results_dir: str) -> int:
    kinds = [k.strip() for k in str(args.faults).split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        print(f"fabtest faults: unknown fault {', '.join(unknown) or '(none given)'}; the faults are "
              f"{', '.join(KINDS)}",
              file=sys.stderr)
        return 2
    unreachable = _out_of_reach() if any(k in FAULTS for k in kinds) else None
    # the pause faults alone, when asked for by name: whether the agent pauses is known only after a run
    if unreachable and (args.faults == ",".join(KINDS) or not any(k in PAUSE_FAULTS for k in kinds)):
        print(f"fabtest faults: no fault can be injected: {unreachable}; {_REACH}; nothing run (an agent that "
              "asks for approvals can still have them decided: --faults approve,reject)", file=sys.stderr)
        return 2
    if unreachable:
        kinds = [k for k in kinds if k in PAUSE_FAULTS]
    out = Path(results_dir) / "faults"
    base = f"faults_{uuid.uuid4().hex[:8]}"
    extra = list(args.pytest_arg)
    baseline = _pytest([*args.paths, *extra, "--fabtest-results-dir", str(out), "--fabtest-experiment-id", base])
    doc = _read(out / f"{base}.json")
    if doc is None:
        print(f"fabtest faults: the baseline run wrote no experiment (exit {baseline.returncode}):\n"
              f"{(baseline.stdout + baseline.stderr)[-2000:]}", file=sys.stderr)
        return 2
    passing = [s for s in doc.get("scenario_results", []) if s.get("passed") and not s.get("skipped")
               and s.get("nodeid")]
    plan, rows = _plan(passing, kinds, base)
    if unreachable and not plan:
        print(f"fabtest faults: no fault can be injected: {unreachable}, and no passing scenario's agent asked for "
              f"an approval; {_REACH}; nothing more run", file=sys.stderr)
        return 2
    print(f"baseline {base}: {len(passing)} passing scenario(s); {len(plan)} fault run(s) "
          f"({len({t for t, _ in plan})} tool(s) x {len(kinds)} fault(s))")

    def one(index: int, tool: str, kind: str, scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
        run_id = f"{base}_{index}"
        nodeids = list(dict.fromkeys(str(s["nodeid"]) for s in scenarios))
        _pytest([*nodeids, *extra, "--fabtest-results-dir", str(out), "--fabtest-experiment-id", run_id,
                 "--fabtest-fault", f"{tool}={kind}", "--fabtest-tag", f"fault:{tool}={kind}",
                 "--fabtest-no-preflight"])
        ran = {s.get("nodeid"): s for s in (_read(out / f"{run_id}.json") or {}).get("scenario_results", [])}
        return [_row(scenario, ran.get(scenario["nodeid"]), tool, kind, run_id) for scenario in scenarios]

    # the tool faults first (sorted by tool, then kind), the pause faults after: they never find a tool out of reach
    ordered = sorted(plan.items(), key=lambda item: (item[0][1] in PAUSE_FAULTS, item[0]))
    runs = [(i, tool, kind, scenarios) for i, ((tool, kind), scenarios) in enumerate(ordered)]
    stub_runs = [run for run in runs if run[2] in FAULTS]
    pause_runs = [run for run in runs if run[2] in PAUSE_FAULTS]
    if stub_runs:  # alone first: it tells whether a fault can reach the tools at all
        rows += one(*stub_runs[0])
    unstubbable = _unstubbable(rows)  # what the first fault run said, where the adapter could not tell before
    if unstubbable and not pause_runs:
        print(f"fabtest faults: no fault can be injected: {unstubbable}; {_REACH}; the other "
              f"{len(runs) - 1} fault run(s) not made, nothing written", file=sys.stderr)
        return 2
    # then each other tool's first fault: a tool no fault reaches (a handoff, a tool without
    # @fabtest.tool) is told there, and not run with the other kinds
    firsts = [] if unstubbable else [run for n, run in enumerate(stub_runs)
                                     if n and all(r[1] != run[1] for r in stub_runs[:n])]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows += [row for future in [pool.submit(one, *run) for run in firsts] for row in future.result()]
        blocked = {run[1]: unstubbable for run in stub_runs} if unstubbable else _blocked(rows)
        left = [run for run in stub_runs[1:] if run not in firsts]
        if stub_runs and not pause_runs and len(blocked) == len({run[1] for run in stub_runs}):
            print(f"fabtest faults: no tool of the agent can be faulted ({'; '.join(blocked.values())}); {_REACH}; "
                  f"the other {len(left)} fault run(s) not made, nothing written", file=sys.stderr)
            return 2
        skipped = [run for run in left if run[1] in blocked]
        futures = [pool.submit(one, *run) for run in [*left, *pause_runs] if run not in skipped]
        rows += [row for future in futures for row in future.result()]
    rows += [_row(s, None, tool, kind, None, blocked[tool]) for _, tool, kind, found in skipped for s in found]
    rows.sort(key=lambda r: (str(r["scenario"]), r["tool"], KINDS.index(r["fault"])))
    report = {"baseline": base, "faults": kinds, "runs": len(runs) - len(skipped),
              "rows": rows, "held": sum(r["outcome"] == "held" for r in rows),
              "broke": sum(r["outcome"] == "broke" for r in rows),
              "not_injectable": sum(r["outcome"] == NOT_INJECTABLE for r in rows),
              "coverage": {"faults": fault_coverage(rows)}}
    write_text_atomic(out / f"{base}.faults.json", json.dumps(report, indent=2, ensure_ascii=False))
    # the baseline experiment carries its matrix too: one file says what ran and what it withstood,
    # rewritten by the path that writes every experiment file (as rejudge and replay add their sections)
    info, results, _ = load_document(out / f"{base}.json", out)
    write_experiment(info, results, out, {"faults": {k: v for k, v in report.items() if k != "baseline"}})
    _print(report)
    print(f"\nwritten to {out / f'{base}.faults.json'} and the baseline experiment {out / f'{base}.json'}")
    return floor_exit(report, args.min_coverage)


def _plan(passing: list[dict[str, Any]], kinds: list[str],
          base: str) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[dict[str, Any]]]:
    """The scenarios each tool x fault run re-runs: every tool a passing scenario called, with each
    tool fault; every tool its agent asked approval for, with each pause fault. The second part is
    the cells the baseline already decides: a pause fault whose decision the baseline took on every
    approval of the tool held there (the baseline passed), no run needed."""
    plan: dict[tuple[str, str], list[dict[str, Any]]] = {}
    settled: list[dict[str, Any]] = []
    for scenario in passing:
        turns = scenario.get("transcript") or []
        called = sorted({c.get("name") for t in turns for c in t.get("tool_calls") or []
                         if isinstance(c.get("name"), str)})
        asked: dict[str, set[str]] = {}
        for turn in turns:
            for pause in turn.get("pauses") or []:
                if pause.get("kind") == "approval" and isinstance(pause.get("tool"), str):
                    decided = "approved" if pause.get("decision") == "edited" else str(pause.get("decision"))
                    asked.setdefault(pause["tool"], set()).add(decided)
        for kind in kinds:
            for tool in called if kind in FAULTS else sorted(asked):
                if kind in PAUSE_FAULTS and asked[tool] == {PAUSE_FAULTS[kind]}:
                    settled.append(_row(scenario, scenario, tool, kind, base))
                else:
                    plan.setdefault((tool, kind), []).append(scenario)
    return plan, settled


def floor_exit(report: dict[str, Any], min_coverage: float) -> int:
    """1 when a pair broke and the coverage is below ``--min-coverage`` (saying so on stderr), else 0."""
    rate = report["coverage"]["faults"]["rate"]
    if report["broke"] and (rate is None or rate < min_coverage):
        print(f"faults coverage {rate or 0:.0%} is below --min-coverage {min_coverage:.0%}", file=sys.stderr)
        return 1
    return 0


def _row(scenario: dict[str, Any], result: dict[str, Any] | None, tool: str, kind: str, run_id: str | None,
         blocked: str | None = None) -> dict[str, Any]:
    """One cell of the matrix: held, broke (with the failing check), or not injectable (the fault run
    said the agent cannot have the tool faulted, or the tool's first run said so: ``blocked``)."""
    held = bool(result and result.get("passed"))
    why = blocked or ("" if held else (result or {}).get("failure_message") or "the run recorded no result")
    cannot = blocked or (None if held else not_injectable(str(why)))
    outcome = "held" if held else NOT_INJECTABLE if cannot else "broke"
    return {"scenario": scenario.get("name"), "nodeid": scenario["nodeid"], "tool": tool, "fault": kind,
            "outcome": outcome, "check": cannot or " ".join(str(why).splitlines()[:2])[:300], "experiment": run_id}


def _blocked(rows: list[dict[str, Any]]) -> dict[str, str]:
    """The tools every scenario's tool-fault run found not injectable, with why (a pause fault always reaches)."""
    tools: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["fault"] in FAULTS:
            tools.setdefault(row["tool"], []).append(row)
    return {tool: found[0]["check"] for tool, found in tools.items()
            if all(r["outcome"] == NOT_INJECTABLE for r in found)}


_REACH = ("faults reach the functions a Python or framework agent decorates with @fabtest.tool, the built-in "
          "agent's tools and a LangGraph ToolNode (docs/how-to/stub-tools.md)")


def _out_of_reach() -> str | None:
    """Why no agent of the project can have a tool faulted, told from its adapter before any run (the
    first fault run still stops the rest when it could not be told: a conftest's agent, say)."""
    from fabtest.config.settings import Settings
    from fabtest.engine.stubbing import tools_out_of_reach
    from fabtest.errors import UsageError

    root = Path.cwd()
    if str(root) not in sys.path:  # `agent = "bot:build"` names a module of the project, as under pytest
        sys.path.insert(0, str(root))
    try:
        return tools_out_of_reach(Settings.load(root), root)
    except UsageError:
        return None  # a broken configuration: the baseline run says what and where


def _unstubbable(rows: list[dict[str, Any]]) -> str:
    """What the first fault run said when the agent's tools are out of a stub's reach ("" when they are not):
    every other run would fail the same way, and a matrix of "broke" would blame the agent."""
    for row in rows:
        said = str(row["check"])
        if row["outcome"] == NOT_INJECTABLE and "cannot be stubbed" in said:  # the reason, as not_injectable gives it
            return said
    return ""


def _print(report: dict[str, Any]) -> None:
    from tabulate import tabulate

    rows = [[r["scenario"], r["tool"], r["fault"], r["outcome"], r["check"][:120]] for r in report["rows"]]
    print(tabulate(rows, headers=["scenario", "tool", "fault", "outcome", "failing check"]) if rows
          else "no passing scenario called a tool: nothing to inject")
    print(f"\nresilience: {report['held']} held, {report['broke']} broke, over {report['runs']} fault run(s)")
    blocked = _blocked(report["rows"])
    if blocked:
        print(f"not injectable, left out of the coverage: {', '.join(blocked)} ({next(iter(blocked.values()))}"
              + (", ..." if len(blocked) > 1 else "") + ")")
    faults = report["coverage"]["faults"]
    if faults["declared"]:
        print(f"faults coverage: {faults['rate']:.0%} of {faults['declared']} tool x fault pair(s) held"
              + (f"; broke: {', '.join(faults['broke'])}" if faults["broke"] else ""))


def register(sub: SubParsers) -> None:
    """``fabtest faults``."""
    p = sub.add_parser("faults",
                       help="the fault matrix: re-run each passing scenario with each tool it called failing, "
                            "timing out, empty, malformed or injected; prints held / broke")
    add_faults_args(p)
    p.set_defaults(func=lambda a: run_faults(a, results_dir_of(a)))
