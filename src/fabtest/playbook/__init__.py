"""Playbooks (shared/seeds/playbook.schema.json): loading, secrets, workspaces, running.

- :func:`load_playbook` / :class:`Playbook` / :class:`PlaybookError` (``load.py``)
- :func:`interpolate` / :class:`Redactor` (``secrets.py``), :class:`Workspace` (``workspace.py``)
- :func:`run_playbook` (``run.py``) / :class:`PlaybookOutcome` (``outcome.py``); success criteria
  (``criteria.py``), result and trace (``record.py``), judge and simulator (``evaluator.py``)

The command ``fabtest run FILE...`` is :mod:`fabtest.cli.run`.
"""

from __future__ import annotations

from fabtest.playbook.evaluator import needed_llms
from fabtest.playbook.load import Playbook, PlaybookError, load_playbook, validate_playbook
from fabtest.playbook.outcome import PlaybookOutcome
from fabtest.playbook.run import run_playbook
from fabtest.playbook.secrets import Redactor, interpolate
from fabtest.playbook.workspace import Workspace

__all__ = [
    "Playbook",
    "PlaybookError",
    "PlaybookOutcome",
    "Redactor",
    "Workspace",
    "interpolate",
    "load_playbook",
    "needed_llms",
    "run_playbook",
    "validate_playbook",
]
