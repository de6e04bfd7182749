"""Secrets never leak (issue 22, reliability round 2, item 2): a value substituted from ``${VAR}``
is redacted in every encoding a writer produces (JSON-escaped, ``/`` escaped, repr, URL-encoded,
HTML-escaped, and those nested once) and in every output: console (failure messages, captured
stdout, stderr and logs), results file, journal."""

from __future__ import annotations

import html
import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from fabtest._internal.redaction import Redactor

TOKENS = ["tok-plain-4f9a27c1", "tok/with/slash/77", 'tok"quoted"88', "tok\\back\\slash", "tok'single'99",
          "tok with space&amp=1", "tök-ünicode-€€"]

ENCODINGS = {
    "raw": lambda s: s,
    "json": lambda s: json.dumps(s)[1:-1],
    "json_unicode": lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
    "json_slash": lambda s: json.dumps(s)[1:-1].replace("/", "\\/"),
    "repr": lambda s: repr(s),
    "repr_in_dict": lambda s: repr({"key": s}),
    "url": lambda s: quote(s, safe=""),
    "url_path": lambda s: quote(s),
    "url_plus": lambda s: quote_plus(s),
    "html": lambda s: html.escape(s),
    "json_of_repr": lambda s: json.dumps(f"agent said: {s!r}"),
    "json_of_json": lambda s: json.dumps(json.dumps({"k": s})),
    "repr_of_json_slash": lambda s: repr(json.dumps({"k": s}).replace("/", "\\/")),
}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("token", TOKENS)
def test_every_encoding_of_a_secret_is_redacted(token: str, encoding: str) -> None:
    text = f"before {ENCODINGS[encoding](token)} after"
    redacted = Redactor([token]).redact(text)
    assert "***" in redacted and redacted.startswith("before ") and redacted.endswith(" after")
    for form in ENCODINGS.values():  # no spelling of it is left
        assert form(token).strip("'\"") not in redacted


PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
results_dir = "results"
agent = {factory = "leaky:build", api_key = "${TOKEN}"}
'''

LEAKY_AGENT = '''
import json, logging, sys
from fabtest import AgentResponse


class Leaky:
    def __init__(self, key):
        self.key = key

    def chat(self, messages):
        print("stdout has", self.key)
        print("stderr has", self.key, file=sys.stderr)
        logging.getLogger("leaky").warning("log has %s", self.key)
        said = messages[-1].content
        if said == "raise":
            raise RuntimeError(f"auth failed for key {self.key}")
        if said == "json":
            return AgentResponse(text=json.dumps({"k": self.key}).replace("/", "\\\\/"))
        if said == "repr":
            return AgentResponse(text=repr({"k": self.key}))
        return AgentResponse(text=f"your key is {self.key}")

    def metadata(self):
        return {"key": self.key, "url": "https://x.test/?k=" + self.key}


def build(context):
    return Leaky(context["api_key"])
'''

FEATURE = "Feature: Leak\n" + "".join(
    f'  Scenario: {said}\n    When the user says "{said}"\n    Then the response must match "nothing"\n'
    for said in ("echo", "raise", "json", "repr"))


@pytest.mark.parametrize("token", ['tok/SE"CRET\\4f9', "tok-plain-4f9a27c1"])
def test_an_echoed_raised_or_reported_secret_reaches_no_output(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TOKEN", token)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makepyfile(leaky=LEAKY_AGENT)
    pytester.makefile(".feature", leak=FEATURE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rA", "--tb=long",
                                           "--fabtest-experiment-id", "exp_leak", "--fabtest-no-preflight")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, output
    assert "4 failed" in output and "auth failed for key ***" in output  # still explained
    doc_text = (pytester.path / "results" / "exp_leak.json").read_text(encoding="utf-8")
    for text in (output, doc_text):
        for name, form in ENCODINGS.items():
            assert form(token).strip("'\"") not in text, name
    assert "stdout has ***" in output and "log has ***" in output
    doc = json.loads(doc_text)
    assert all(s["agent_metadata"]["key"] == "***" for s in doc["scenario_results"])


def test_the_journal_of_a_run_holds_no_secret(tmp_path: Path) -> None:
    from fabtest._internal import redaction
    from fabtest.experiment.model import ScenarioResult
    from fabtest.experiment.recorder import Recorder

    token = 'tok/SE"CRET\\4f9'
    redaction.register(token)
    try:
        recorder = Recorder(results_dir=tmp_path, experiment_id="exp_j", cwd=str(tmp_path))
        recorder.add(ScenarioResult(id="f:000000000001", name="n", passed=False,
                                    failure_message=f"agent said: {json.dumps({'k': token})!r}"))
        journal = recorder.journal.read_text(encoding="utf-8")
        assert "***" in journal and "SE" not in journal.replace("SELECT", "")
        recorder.discard()
    finally:
        redaction.clear()
