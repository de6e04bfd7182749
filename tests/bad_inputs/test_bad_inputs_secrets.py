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
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
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


# -- round 3 (issue 30): the encodings fabtest itself produces, and the keys it holds ----------------
@pytest.mark.parametrize("user", ["", "a", "ab", "bot", "a-longer-user"])
def test_a_basic_auth_header_built_from_a_url_password_is_redacted(user: str) -> None:
    """httpx turns ``https://user:${PASS}@host`` into ``Authorization: Basic base64(user:pass)``; the
    password's bytes start at any of 3 offsets of that base64, and each is redacted."""
    import base64

    password = 'pa/ss"w0rd-4f9a27'
    header = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    for redactor in (Redactor([password]), Redactor([f"{user}:{password}"])):
        redacted = redactor.redact(f"auth={header} end")
        assert header not in redacted and "***" in redacted and redacted.endswith(" end")
        assert password.encode() not in base64.b64decode(redacted.split()[1].replace("***", "") + "==", validate=False)


def test_base64_of_a_short_secret_only_hides_whole_values() -> None:
    """A 4-byte secret's base64 runs are too short to hunt inside other base64 (they would match by
    chance); standing alone, the value is still hidden."""
    import base64

    token = "k3y!"
    assert Redactor([token]).redact(base64.b64encode(token.encode()).decode()) == "***"
    assert Redactor([token]).redact("aGVsbG8gd29ybGQ=") == "aGVsbG8gd29ybGQ="


ECHO_PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
results_dir = "results"
agent = {{http = "http://bot:${{BOT_PASS}}@127.0.0.1:{port}/chat", timeout = 5}}
'''


def test_an_echoed_llm_key_and_basic_auth_header_reach_no_output(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent echoes the Authorization header fabtest's HTTP client built and the GEMINI_API_KEY the
    run holds (no agent table names it): neither reaches the console, results, journal or report."""
    import base64
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    llm_key = "AIzaFAKE-gemini-key-0123456789"
    password = "bot-pass-Z9y8x7w6"

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"text": f"header {self.headers['Authorization']} key {llm_key}",
                               "metadata": {"key": llm_key}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.setenv("GEMINI_API_KEY", llm_key)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")  # never the internet
        monkeypatch.setenv("BOT_PASS", password)
        pytester.makefile(".toml", pyproject=ECHO_PYPROJECT.format(port=server.server_address[1]))
        pytester.makefile(".feature", leak='Feature: Leak\n  Scenario: echo\n    When the user says "hi"\n'
                                           '    Then the response must match "nothing"\n')
        result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rA", "--tb=long",
                                               "--fabtest-experiment-id", "exp_echo", "--fabtest-no-preflight")
    finally:
        server.shutdown()
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, output
    assert "header Basic ***" in output and "key ***" in output  # the failure is still explained
    report = subprocess.run([sys.executable, "-m", "fabtest.cli", "report", "exp_echo", "--results-dir",
                             str(pytester.path / "results")], capture_output=True, text=True, timeout=60,
                            cwd=pytester.path)
    assert report.returncode == 0, report.stderr
    header = base64.b64encode(f"bot:{password}".encode()).decode()
    texts = [output, *(p.read_text(encoding="utf-8") for p in (pytester.path / "results").iterdir() if p.is_file())]
    for text in texts:
        for leak in (llm_key, password, header, header.rstrip("=")):
            assert leak not in text
    doc = json.loads((pytester.path / "results" / "exp_echo.json").read_text(encoding="utf-8"))
    assert doc["scenario_results"][0]["agent_metadata"]["url"] == "http://***@127.0.0.1:" + str(
        server.server_address[1]) + "/chat"
