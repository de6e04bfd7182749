"""``fabtest import FILE``: a recorded conversation becomes a scripted regression feature.

The file is read (:mod:`fabtest.authoring.transcripts`), written as a feature
(:mod:`fabtest.authoring.feature_text`) with every secret the project configures masked
(:mod:`fabtest._internal.redaction`: the values of ``${VAR}`` in ``[tool.fabtest]`` agent tables
and the LLM keys in the environment), and never over an existing file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabtest._internal import redaction
from fabtest.cli.common import results_dir_of
from fabtest.errors import UsageError

if TYPE_CHECKING:
    from fabtest.cli.common import SubParsers

__all__ = ["IMPORT_FORMATS", "add_import_args", "register", "run_import"]

#: the formats of one recorded conversation (authoring/transcripts.py's FORMATS, without importing it here)
IMPORT_FORMATS = ("fabtest", "openai", "gemini", "messages", "otlp", "openai-agents", "langchain", "adk")

def add_import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the recorded conversation (JSON), or an experiment id")
    p.add_argument("--format", dest="fmt", default=None, choices=IMPORT_FORMATS,
                   help="the file's format (default: told from its shape)")
    p.add_argument("--as", dest="mode", default="scripted", choices=("scripted", "simulated"),
                   help="scripted (the default): the user's lines replayed, the agent's tool calls asserted; "
                        "simulated: a goal, persona and facts drafted by the judge LLM, shown for review first")
    p.add_argument("--yes", action="store_true", help="with --as simulated: write the draft without asking")
    p.add_argument("--scenario", default=None, metavar="NAME", help="from an experiment: the scenario (name or id)")
    p.add_argument("--run", type=int, default=None, metavar="N",
                   help="from an experiment: the run (iteration) to import (default: the first failed run)")
    p.add_argument("--agent", default=None, metavar="NAME",
                   help='add Given the agent "NAME" (default: the project\'s agent)')
    p.add_argument("-o", "--output", default=None, metavar="PATH",
                   help="the feature to write (default: features/regressions/<name>.feature); never overwritten")
    p.add_argument("--all", action="store_true",
                   help="FILE is production logs (a file or folder, any format fabtest score reads): write every "
                        "conversation as a feature into --out, word-for-word duplicates once")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="with --all: the folder of the features (default: features/regressions/production)")
    p.add_argument("--failing-in", default=None, metavar="EXP",
                   help="with --all: a fabtest score experiment; the conversations that failed a must there come first")


def run_import(args: argparse.Namespace, results_dir: str) -> int:
    from fabtest.authoring.feature_text import regression_path
    from fabtest.authoring.transcripts import read_conversation

    if args.all:
        return _import_all(args, results_dir)
    try:
        path = _resolve(args.file, results_dir)
        conversation = read_conversation(path, fmt=args.fmt, scenario=args.scenario, run=args.run)
        redaction.register_project_secrets(Path("pyproject.toml"))
        out = regression_path(conversation.name, args.output, fallback="imported")
        if out.exists():
            raise UsageError(f"{out} exists; fabtest import never overwrites a file (choose another with -o PATH)")
        if args.mode == "simulated":
            return _simulated(args, conversation, path, out)
        from fabtest.authoring.feature_text import feature_text, write_feature, write_files

        files_dir = f"{out.stem}_files"  # the turns' files, beside the feature
        write_feature(out, redaction.redact(feature_text(conversation, source=str(path), agent=args.agent,
                                                         files_dir=files_dir)))
        write_files(conversation, out.parent / files_dir)
    except UsageError as exc:
        print(f"fabtest import: {exc}{_logs_hint(args.file)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"fabtest import: cannot write the feature: {exc}", file=sys.stderr)
        return 2
    calls = sum(len(t.tool_calls) for t in conversation.turns)
    skipped = f"; {conversation.skipped} system or opening message(s) left out" if conversation.skipped else ""
    print(f"wrote {out}: {len(conversation.turns)} user turn(s), {calls} tool call(s) asserted{skipped}")
    print(f"next: write what a good answer does in its criterion placeholder, then: pytest {out}")
    return 0


def _simulated(args: argparse.Namespace, conversation: Any, path: Path, out: Path) -> int:
    """Draft the user with the judge LLM, show it, and write it once a person said yes."""
    from fabtest.authoring.draft_user import draft_user
    from fabtest.authoring.feature_text import simulated_feature, write_feature
    from fabtest.cli.llms import judge_llm
    from fabtest.llm.base import LLMError, LLMNotConfigured

    try:
        drafted = draft_user(judge_llm(None), conversation)
    except LLMNotConfigured as exc:
        raise UsageError(f"--as simulated needs the judge LLM: {exc}") from None
    except LLMError as exc:
        raise UsageError(f"the judge LLM failed: {exc}") from None
    text = redaction.redact(simulated_feature(conversation, drafted, source=str(path), agent=args.agent))
    print(text)
    if not args.yes:
        if not sys.stdin.isatty():
            print("fabtest import: not written: review the draft above, then run again with --yes", file=sys.stderr)
            return 1
        if input(f"Write it to {out}? [y/N] ").strip().lower() not in ("y", "yes"):
            print("not written")
            return 1
    write_feature(out, text)
    print(f"wrote {out}: a simulated user drafted from {len(conversation.turns)} recorded user turn(s)")
    return 0


def _logs_hint(ref: str) -> str:
    """When FILE is production logs (Langfuse, MLflow, Phoenix, ...): say that ``--all`` reads them."""
    from fabtest.production.logs import detect
    from fabtest.production.records import records

    try:
        head = next(records(Path(ref)), None) if Path(ref).is_file() else None
    except UsageError:
        return ""
    name = detect(head.value)[0] if head is not None else None
    return f" (it reads as {name} logs: fabtest import {ref} --all writes each of their conversations)" if name else ""


def _failing_conversations(ref: str | None, results_dir: str) -> set[str]:
    """The conversation ids whose runs failed in a ``fabtest score`` experiment."""
    if ref is None:
        return set()
    from fabtest.experiment.reader import ExperimentFileError, load_document

    try:
        _info, results, _doc = load_document(ref, results_dir)
    except ExperimentFileError as exc:
        raise UsageError(f"--failing-in: {exc}") from None
    if not any(r.production for r in results):
        raise UsageError(f"--failing-in {ref}: not a fabtest score experiment (its runs name no logged conversation)")
    return {str(r.production["conversation"]) for r in results if r.production and not r.passed and not r.skipped}


def _import_all(args: argparse.Namespace, results_dir: str) -> int:
    """``fabtest import LOGS --all --out DIR``: every logged conversation as a scripted feature."""
    from fabtest.config.settings import Settings
    from fabtest.production.logs import read_logs
    from fabtest.production.regressions import import_all
    from fabtest.production.selection import mask_of

    try:
        if args.output or args.mode != "scripted":
            raise UsageError("--all writes scripted features into --out DIR (not -o, not --as simulated)")
        settings = Settings.load(Path.cwd())
        mask = mask_of(settings)
        failing = _failing_conversations(args.failing_in, results_dir)
        out = Path(args.out or "features/regressions/production")
        logs = read_logs([args.file], warn=lambda line: print(f"fabtest import: warning: {line}", file=sys.stderr))
        report = import_all(logs, out, mask=mask, failing=failing, results_dir=results_dir, agent=args.agent)
    except UsageError as exc:
        print(f"fabtest import: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"fabtest import: cannot write the features: {exc}", file=sys.stderr)
        return 2
    for conversation, path, failed in report.written:
        print(f"wrote {path}" + (" (failed in production)" if failed else "") + f": {conversation}")
    print(f"{len(report.written)} feature(s) written to {out}"
          + (f"; {report.duplicates} word-for-word duplicate(s) left out" if report.duplicates else "")
          + (f"; {report.already_imported} imported before (left as they are)" if report.already_imported else "")
          + (f"; {len(report.existing)} existing file(s) kept as they were" if report.existing else ""))
    if report.written:
        print(f"next: review the tool calls each one asserts, then: pytest {out}")
    return 0


def _resolve(ref: str, results_dir: str) -> Path:
    path = Path(ref)
    if path.exists():
        return path
    from fabtest.experiment.reader import ExperimentFileError, read_document

    try:
        found, _ = read_document(ref, results_dir, lean=True)
    except ExperimentFileError:
        raise UsageError(f"{ref}: no such file, nor an experiment of that id in {results_dir}/") from None
    return found


def register(sub: SubParsers) -> None:
    """``fabtest import``."""
    p = sub.add_parser("import", help="turn a recorded conversation (a fabtest run, OpenAI or Gemini messages) "
                                      "into a scripted regression feature")
    add_import_args(p)
    p.add_argument("--results-dir", default=None)
    p.set_defaults(func=lambda a: run_import(a, results_dir_of(a)))
