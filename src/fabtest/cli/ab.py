"""``fabtest ab BASELINE CURRENT [options] [-- pytest args]``: run both arms, buy runs on both, decide.

Each arm is a git ref (checked out in a temporary ``git worktree``) or ``.`` (the working tree),
optionally with its own agent, pytest arguments or environment (``--baseline-agent``,
``--current-arg``, ...), so two arms of one tree can differ only by configuration. Both arms run
the same first pass (``--iterations``, default 5) at the same time, then one iteration at a time of
the scenarios feeding undecided metrics, on both, until the paired decision
(:mod:`fabtest.compare.paired`) is made, ``--budget`` is spent or the budget left cannot decide
(:mod:`fabtest.ab.rounds`). Both experiments are kept as normal files recording their arm; the
comparison is printed as ``fabtest-compare`` prints one. Exit 1 worse, 0 not worse, 3 undecided,
2 bad input (one line, never a traceback). docs/gates.md and docs/how-to/ab-in-ci.md say more.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabtest._internal.redaction import redact
from fabtest._internal.signals import restore_sigterm, sigterm_as_interrupt
from fabtest._internal.subprocesses import Child, run_together
from fabtest._internal.terminal import inert
from fabtest.ab.arms import Arm, ArmSpec, checkout, remove
from fabtest.ab.rounds import EXCEEDED, RoundsResult, run_rounds
from fabtest.ab.session import ArmSession
from fabtest.cli.common import results_dir_of
from fabtest.compare.paired import PairedDecision, Plan, decide_paired
from fabtest.errors import UsageError

__all__ = ["register", "run_ab"]

EXIT_NOT_WORSE, EXIT_WORSE, EXIT_BAD, EXIT_UNDECIDED = 0, 1, 2, 3
_EXIT = {"worse": EXIT_WORSE, "not worse": EXIT_NOT_WORSE, "undecided": EXIT_UNDECIDED}
PROG = "fabtest ab"


def register(sub: Any) -> None:
    """The ``ab`` sub-command."""
    p = sub.add_parser("ab", help="A/B: run two git refs (or configurations) of the suite, buy runs on both until "
                                  "the gate decides; exit 1 worse, 0 not worse, 3 undecided")
    p.add_argument("baseline", metavar="BASELINE",
                   help="a git ref (origin/main, a tag, a commit) or . (the working tree)")
    p.add_argument("current", metavar="CURRENT", help="a git ref or . (the working tree)")
    p.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS",
                   help="after --: arguments for every pytest run of both arms (paths, -k, --fabtest-* options)")
    p.add_argument("--iterations", type=_positive, default=5, metavar="N",
                   help="the first pass: N iterations of every scenario on both arms (default 5)")
    p.add_argument("--budget", default=None, metavar="RUNS|$USD",
                   help="the most to spend beyond the first pass: scenario runs on both arms (240) or dollars ($5); "
                        "0: the first pass only (default: 3x the first pass's runs)")
    p.add_argument("--alpha", type=_level, default=0.05, metavar="LEVEL", help="error rate of each outcome (0.05)")
    p.add_argument("--gate-margin", type=_margin, default=0.10, metavar="POINTS",
                   help="'not worse' shows no pooled metric dropped by more than POINTS (default 10)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--results-dir", default=None,
                   help="where both experiments are written (default: [tool.fabtest] results_dir of ., else results)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="the most one round may take (seconds)")
    for arm in ("baseline", "current"):
        p.add_argument(f"--{arm}-agent", default=None, metavar="MODULE:ATTR",
                       help=f"the {arm} arm's agent (pytest's --fabtest-agent), e.g. to A/B two agents of one tree")
        p.add_argument(f"--{arm}-arg", action="append", default=[], metavar="ARG",
                       help=f"one more pytest argument for the {arm} arm only (repeatable; write --{arm}-arg=--x=y)")
        p.add_argument(f"--{arm}-env", action="append", default=[], metavar="KEY=VALUE", type=_env_pair,
                       help=f"an environment variable for the {arm} arm only (repeatable): a model, a prompt file")
    p.set_defaults(func=run_ab)


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of iterations, 1 or more, got {text!r}")
    return int(text)


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a level between 0 and 1 (e.g. 0.05), got {text!r}")
    return value


def _margin(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and 0 < value < 100):
        raise argparse.ArgumentTypeError(f"expected a margin in points, more than 0 and less than 100, got {text!r}")
    return value / 100


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _budget(text: str | None, first_pass_runs: int) -> tuple[float, bool]:
    """(amount, in dollars); UsageError names both forms."""
    if text is None:
        return 3.0 * first_pass_runs, False
    if text.strip() == "0":
        return 0.0, False
    from fabtest.pytest_plugin.until_decided import parse_budget

    try:
        budget = parse_budget(text)
    except ValueError as exc:
        raise UsageError(f"--budget: {exc}") from None
    return budget.amount, budget.usd


def _say(text: str) -> None:
    print(inert(f"{PROG}: {text}"), file=sys.stderr, flush=True)


def _collect(arms: Sequence[Arm], pytest_args: Sequence[str], scratch: Path) -> dict[str, set[str]]:
    """Each arm's scenario node ids (pytest --collect-only), before any run is spent."""
    from fabtest.pytest_plugin.ab_select import base_nodeid

    children = [Child([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                       *arm.pytest_args(), *pytest_args], cwd=arm.root, env=arm.environment(os.environ),
                      output=scratch / f"{arm.name}-collect.log") for arm in arms]
    found = run_together(children, timeout=600)
    out: dict[str, set[str]] = {}
    for arm, done in zip(arms, found, strict=True):
        ids = {base_nodeid(line.strip()) for line in Path(scratch / f"{arm.name}-collect.log").read_text(
            encoding="utf-8", errors="replace").splitlines() if "::" in line and not line.startswith(" ")}
        if done.returncode not in (0, 5):
            from fabtest.ab.session import _last_line

            raise UsageError(f"{arm.name} arm ({arm.spec.ref}): pytest could not collect the suite "
                             f"(exit {done.returncode}): {_last_line(done.tail) or 'no output'}")
        if not ids:
            raise UsageError(f"{arm.name} arm ({arm.spec.ref}): collected no scenario in {arm.root} "
                             "(no features there, or the pytest arguments select none)")
        out[arm.name] = ids
    return out


def run_ab(args: argparse.Namespace) -> int:
    specs = [ArmSpec(name, ref, getattr(args, f"{name}_agent"), tuple(getattr(args, f"{name}_arg")),
                     dict(getattr(args, f"{name}_env")))
             for name, ref in (("baseline", args.baseline), ("current", args.current))]
    scratch = Path(tempfile.mkdtemp(prefix="fabtest-ab-"))
    arms: list[Arm] = []
    sessions: list[ArmSession] = []
    installed = sigterm_as_interrupt()  # a cancelled CI job stops the arms and removes the checkout too
    try:
        for spec in specs:
            arms.append(checkout(spec, Path.cwd(), scratch))
        collected = _collect(arms, args.pytest_args, scratch)
        shared = collected["baseline"] & collected["current"]
        if not shared:
            raise UsageError(f"the arms share no scenario (baseline collected {len(collected['baseline'])}, current "
                             f"{len(collected['current'])}; a scenario is shared when its feature path and name are "
                             "the same in both)")
        budget, usd = _budget(args.budget, 2 * args.iterations * len(shared))
        if not usd and 0 < budget < 2 * len(shared):
            raise UsageError(f"--budget {args.budget}: cannot buy one more iteration of the {len(shared)} shared "
                             f"scenario(s) on both arms ({2 * len(shared)} runs); give at least {2 * len(shared)}, or "
                             "0 for the first pass only")
        stamp = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]
        results = Path(results_dir_of(args)).resolve()
        sessions = [ArmSession(arm, f"ab-{stamp}-{arm.name}", scratch, results, args.pytest_args, os.environ)
                    for arm in arms]
        outcome = _rounds(args, sessions, budget, usd)
        return _report(args, sessions, outcome, budget, usd)
    except UsageError as exc:
        _say(f"error: {exc}")
        return EXIT_BAD
    except KeyboardInterrupt:
        kept = [str(s.path) for s in sessions if s.path is not None]
        _say("interrupted: both arms stopped" + (f"; experiments kept with what ran: {', '.join(kept)}" if kept
                                                  else "; nothing had been recorded yet") + "; worktrees removed")
        return EXIT_UNDECIDED
    finally:
        for arm in arms:
            remove(arm)
        shutil.rmtree(scratch, ignore_errors=True)
        restore_sigterm(installed)


def _rounds(args: argparse.Namespace, sessions: list[ArmSession], budget: float, usd: bool) -> RoundsResult:
    state: dict[str, Any] = {"round": 0, "unknown_cost": False}

    def run_round(scenarios: Sequence[str] | None, iterations: range) -> float:
        state["round"] += 1
        k = state["round"]
        before = sum((s.spent_usd() or 0.0) for s in sessions) if usd else 0.0
        order = sessions if k % 2 else sessions[::-1]  # who starts first alternates: drift hits both alike
        what = "every scenario" if scenarios is None else f"{len(scenarios)} scenario(s)"
        _say(f"round {k}: iteration(s) {iterations.start}-{iterations.stop - 1} of {what} on both arms")
        children = []
        try:
            for s in order:
                select = None if scenarios is None else [n for sid, n in s.nodeids().items() if sid in scenarios]
                children.append((s, s.start(k, iterations, select)))
            finished = run_together([c for _, c in children], timeout=args.timeout)
        except KeyboardInterrupt:
            for s, _ in children:
                _keep_interrupted(s, k)
            raise
        for (s, _), done in zip(children, finished, strict=True):
            s.finish(k, done)
        if usd:
            after = [s.spent_usd() for s in sessions]
            if any(a is None for a in after):
                state["unknown_cost"] = True
            return sum(a or 0.0 for a in after) - before
        return 2.0 * (len(scenarios) if scenarios is not None else len(_shared(sessions))) * len(iterations)

    def look(plan: Plan) -> PairedDecision:
        (b_runs, names, _), (c_runs, c_names, _) = (s.runs() for s in sessions)
        decision = decide_paired(b_runs, c_runs, alpha=args.alpha, margin=args.gate_margin, names={**c_names, **names},
                                 problems=_problems(b_runs, c_runs) or _untested(sessions), plan=plan)
        open_ = ", ".join(m.label for m in decision.undecided()[:3])
        _say(f"after round {state['round']}: {len(b_runs)} baseline and {len(c_runs)} current runs; "
             f"{decision.outcome}" + (f" ({open_} open)" if decision.outcome == "undecided" and open_ else ""))
        return decision

    def cost(scenarios: Sequence[str] | None) -> float:
        if scenarios is None:  # the plan: every shared scenario at the first pass's mean price per run
            every = sorted(_shared(sessions))
            if not usd:
                return 2.0 * len(every)
            prices = [p for s in sessions for p in s.cost_per_run().values()]
            if not prices or state["unknown_cost"]:
                return math.inf
            return 2.0 * len(every) * sum(prices) / len(prices)
        if not usd:
            return 2.0 * len(scenarios)
        per_run = [s.cost_per_run() for s in sessions]
        if any(sid not in prices for prices in per_run for sid in scenarios) or state["unknown_cost"]:
            state["unknown_cost"] = True
            return math.inf
        return sum(prices[sid] for prices in per_run for sid in scenarios)

    result = run_rounds(run_round, look, cost, iterations=args.iterations, budget=budget)
    if usd and state["unknown_cost"] and result.stopped == EXCEEDED:
        result.stopped = ("a run's cost is unknown (tokens of a model without a price; add it under "
                          "[tool.fabtest.prices]): a dollar budget cannot be kept")
    return result


def _keep_interrupted(session: ArmSession, round_no: int) -> None:
    """After Ctrl-C: the round's part, if pytest wrote one, joins the arm's experiment."""
    part = session.work / f"r{round_no}" / f"{session.id}.json"
    if part.is_file():
        session.parts.append(part)
    try:
        session.merge()
    except UsageError:
        pass


def _shared(sessions: list[ArmSession]) -> set[str]:
    ids = [set(s.nodeids()) for s in sessions]
    return ids[0] & ids[1]


def _untested(sessions: list[ArmSession]) -> list[str]:
    """Why the fixed gate would call the arms' experiments untested (compare/gate.py ``untested``: a
    shared scenario with no measured run on the current arm, nothing judged, another judge or
    simulated user): the paired decision is never "not worse" where the gate is not."""
    from fabtest.compare import gate as gating
    from fabtest.compare.compute import compare
    from fabtest.compare.read import read_experiment

    base, cur = sessions
    if base.path is None or cur.path is None:
        return []
    return gating.untested(compare(read_experiment(base.path, base.results_dir)[1],
                                   read_experiment(cur.path, cur.results_dir)[1]))


def _problems(b_runs: Sequence[Any], c_runs: Sequence[Any]) -> list[str]:
    if not b_runs or not c_runs:
        side = "baseline" if not b_runs else "current"
        return [f"the {side} arm ran no scenario (every one skipped or not recorded): untested is never a pass"]
    if not {r.scenario for r in b_runs} & {r.scenario for r in c_runs}:
        return ["no scenario both arms ran"]
    return []


def _report(args: argparse.Namespace, sessions: list[ArmSession], result: RoundsResult, budget: float,
            usd: bool) -> int:
    from fabtest.compare import gate as gating
    from fabtest.compare.compute import compare
    from fabtest.compare.paired_text import combined_line, metric_line, paired_markdown, paired_verdict
    from fabtest.compare.read import read_experiment
    from fabtest.compare.render import md_escape, render_markdown, render_text

    decision = result.decision
    base, cur = sessions
    assert base.path is not None and cur.path is not None
    b_exp, c_exp = read_experiment(base.path, base.results_dir)[1], read_experiment(cur.path, cur.results_dir)[1]
    comparison = compare(b_exp, c_exp)
    gate = gating.evaluate(comparison, gating.GateOptions(alpha=args.alpha, fail_on_regression=True,
                                                          margin=args.gate_margin), describe=False)
    comparison.tallies = None
    comparison.gate = gating.gate_dict(gate, gate.warnings)
    comparison.gate["paired"] = decision.to_dict()
    code = _EXIT[decision.outcome]
    comparison.gate["exit_code"] = code
    worst = next((m.line for m in comparison.moved if m.change > 0), None)  # what moved first, as everywhere
    comparison.verdict = paired_verdict(decision, result.stopped, worst)
    for s in sessions:  # each experiment says what its A/B decided, and against which
        other = cur if s is base else base
        s.merge({"other": other.id, "outcome": decision.outcome, "verdict": comparison.verdict,
                 "stopped": result.stopped, "rounds": result.rounds})
    section = {"runs": {"baseline": base.runs_done, "current": cur.runs_done}, "rounds": result.rounds,
               "stopped": result.stopped, "experiments": {"baseline": str(base.path), "current": str(cur.path)},
               "budget": f"${budget:g}" if usd else int(budget),
               "spent": round(result.spent, 6) if usd else int(result.spent),
               "plan": None if result.plan is None else {"first_pass": result.plan.first_pass,
                                                         "iterations": result.plan.iterations},
               "arms": {s.arm.name: s.arm.record() for s in sessions}, "decision": decision.to_dict()}
    if args.format == "json":
        data = comparison.to_dict()
        data["ab"] = section
        out = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    elif args.format == "markdown":
        out = (f"**Verdict: {md_escape(comparison.verdict)}**\n\n"
               + render_markdown(comparison, paired_markdown(decision, result.stopped, code, md_escape)))
    else:
        out = f"Verdict: {comparison.verdict}\n\n" + render_text(comparison, [])
    sys.stdout.write(inert(redact(out)))
    for m in decision.metrics:
        if m.pooled or m.outcome == "worse":
            _say(metric_line(m))
    _say(combined_line(decision))
    _say(f"stopped: {result.stopped}; {result.rounds} round(s), {base.runs_done} baseline and {cur.runs_done} "
         f"current runs; experiments {base.path} and {cur.path} (exit {code})")
    return code
