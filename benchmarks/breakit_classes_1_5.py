"""Break-it kit of issue 38, classes 1-5: hostile and careless inputs to shrink, the secrets of new
outputs, review labels, fabtest import, the view server and the OTLP receiver; prints probes tried
and handled per class (docs/reliability.md, "Round 4: classes 1-5").

Run on demand from the repository root: ``python benchmarks/breakit_classes_1_5.py`` (about 2
minutes: two probes wait for a server's 10 s read timeout).
A probe is *handled* when fabtest does what docs/reliability.md promises: one line and exit 2 (no
traceback) for a bad input, 400 / 413 from a server (never a dropped connection), nothing lost,
no secret in the output. Everything runs on 127.0.0.1 in a scratch folder.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

Probe = tuple[str, Callable[[Path], bool]]


def _cli(*args: str) -> tuple[int, str]:
    """``fabtest ARGS`` in-process: exit code and stderr + stdout."""
    from fabtest.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, err.getvalue() + out.getvalue()


# -- class 4: fabtest import on hostile files ----------------------------------------------------------
HOSTILE_FILES = {
    "tool_calls a string": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "tool_calls": "x"}],
    "resourceSpans a string": {"resourceSpans": "x"},
    "scopeSpans a string": {"resourceSpans": [{"scopeSpans": "x"}]},
    "spans a number": {"resourceSpans": [{"scopeSpans": [{"spans": 7}]}]},
    "attributes a string": {"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": "x"}]}]}]},
    "arrayValue a string": {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"attributes": [{"key": "k", "value": {"arrayValue": "x"}}]}]}]}]},
    "function a string": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"function": "f"}]}],
    "messages a string": {"messages": "x"},
    "contents a number": {"contents": 5},
    "parts a string": {"contents": [{"role": "user", "parts": "x"}]},
    "experiment transcript a string": {"scenario_results": [{"name": "s", "transcript": "x"}]},
    "experiment tool_calls a string": {"scenario_results": [{"name": "s", "transcript": [
        {"user": "hi", "tool_calls": "x"}]}]},
}


def _import_refuses(data: Any, raw: str | None = None) -> Callable[[Path], bool]:
    def probe(tmp: Path) -> bool:
        path = tmp / "in.json"
        path.write_text(raw if raw is not None else json.dumps(data))
        code, said = _cli("import", str(path), "-o", str(tmp / "out.feature"))
        lines = said.strip().splitlines()
        return (code == 2 and len(lines) == 1 and "Traceback" not in said) or (code == 0 and "Traceback" not in said)
    return probe


ODD_LINES = {"a carriage return": "one\rtwo", "CR LF": "one\r\ntwo", "leading spaces": "   indented",
             "trailing spaces": "end  ", "indented lines": "  a\n  b", "NEL LS PS": "a\x85b\u2028c\u2029d",
             'triple quotes': 'say """ this', 'escaped triple quotes': 'x \\"\\"\\" y', "a tab": "a\tb",
             "only spaces": "   "}


def _import_keeps(text: str) -> Callable[[Path], bool]:
    """The written feature parses (the Gherkin parser pytest-bdd uses) and its step gives the text back."""
    def probe(tmp: Path) -> bool:
        from pytest_bdd.gherkin_parser import get_gherkin_document

        (tmp / "in.json").write_text(json.dumps([{"role": "user", "content": text}]))
        code, _ = _cli("import", str(tmp / "in.json"), "-o", str(tmp / "out.feature"))
        if code != 0:
            return False
        try:
            doc = get_gherkin_document(str(tmp / "out.feature"))
        except Exception:  # noqa: BLE001 - a feature that does not parse is the failure probed for
            return False
        step = doc.feature.children[0].scenario.steps[0]
        if step.text.startswith('the user says exactly "'):
            said = json.loads(step.text[len("the user says exactly "):], strict=False)
        elif step.docstring is not None:
            said = step.docstring.content
        else:
            said = step.text[len('the user says "'):-1].replace('\\"', '"')
        return said == text
    return probe


# -- class 4 and 5: the OTLP receiver and the view server ---------------------------------------------
def _answer(port: int, path: str, body: bytes, headers: dict[str, str]) -> int | str:
    try:
        return httpx.post(f"http://127.0.0.1:{port}{path}", content=body, timeout=30,
                          headers={"Content-Type": "application/json", **headers}).status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


def _short_body(port: int, path: str) -> int | str:
    """Content-Length 100, 10 bytes sent, then silence: the server must answer, not wait forever."""
    with socket.create_connection(("127.0.0.1", port), timeout=40) as raw:
        raw.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                    "Content-Length: 100\r\n\r\n{\"a\": 1}  ".encode())
        reply = raw.recv(100)
    return int(reply.split()[1]) if reply.startswith(b"HTTP/") else "no answer"


BOMB = gzip.compress(b"\0" * 10_000_000) * 200  # ~2 MB that inflate to 2 GB
OTLP_BODIES: dict[str, tuple[bytes, dict[str, str], set[int]]] = {
    "deep JSON": (b"[" * 200_000, {}, {400}),
    "truncated gzip": (gzip.compress(b'{"resourceSpans": []}')[:-12], {"Content-Encoding": "gzip"}, {400}),
    "not gzip": (b"plain", {"Content-Encoding": "gzip"}, {400}),
    "gzip bomb, 2 MB to 2 GB": (BOMB, {"Content-Encoding": "gzip"}, {413}),
    "a span that is a list": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [[1]]}]}]}', {}, {400}),
    "status a string": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"status": "x"}]}]}]}', {}, {400}),
    "attributes of strings": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": ["k"]}]}]}]}', {}, {400}),
    "ids not hex": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', {}, {400}),
    "intValue not a number": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab", '
                              b'"attributes": [{"key": "k", "value": {"intValue": "x"}}]}]}]}]}', {}, {400}),
}


def _otlp(name: str) -> Callable[[Path], bool]:
    def probe(tmp: Path) -> bool:
        from fabtest.agents.otlp_receiver import Receiver

        receiver = Receiver(0)
        try:
            if name == "a body shorter than its Content-Length":
                return _short_body(receiver.port, "/v1/traces") == 400
            body, headers, ok = OTLP_BODIES[name]
            return _answer(receiver.port, "/v1/traces", body, headers) in ok
        finally:
            receiver.close()
    return probe


def _flood(tmp: Path) -> bool:
    """A turn's trace survives 5,000 foreign traces arriving while it runs."""
    from fabtest.agents import otlp_receiver, trace_calls
    from fabtest.conversation import AgentResponse

    receiver = otlp_receiver.receiver(0)

    class Exporting:
        exports_traces = True

    with trace_calls.turn(Exporting(), port=receiver.port, wait=2) as seen:
        _, trace_id, parent, _ = trace_calls.headers()["traceparent"].split("-")
        span = {"traceId": trace_id, "spanId": "0b" * 8, "parentSpanId": parent, "name": "execute_tool lookup",
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}]}
        httpx.post(f"{receiver.endpoint}/v1/traces", json={"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
        flood = [{"traceId": f"{n:032x}", "spanId": "01" * 8, "name": "noise"} for n in range(1, 5001)]
        httpx.post(f"{receiver.endpoint}/v1/traces", json={"resourceSpans": [{"scopeSpans": [{"spans": flood}]}]},
                   timeout=60)
        response = AgentResponse("ok")
        seen(response)
    return [c.name for c in response.tool_calls] == ["lookup"]


def _results(tmp: Path, count: int) -> Path:
    """The view tests' results folder (``count`` experiments; the second ran two iterations)."""
    sys.path[:0] = [str(Path("tests/view").resolve()), str(Path("tests/experiment").resolve())]
    from view_fixtures import results_dir  # type: ignore[import-not-found]

    return Path(results_dir(tmp, count=count))


def _view_server(tmp: Path) -> tuple[Any, int, Path, dict[str, Any]]:
    from fabtest.view.server import make_server

    results = _results(tmp, 1)
    server = make_server(results)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    doc = json.loads((results / "exp_000.json").read_text())
    entry = next(x for x in doc["scenario_results"] if x["name"] == "scenario 1")
    return server, server.server_address[1], results, entry


def _view(name: str) -> Callable[[Path], bool]:
    def probe(tmp: Path) -> bool:
        server, port, results, entry = _view_server(tmp)
        try:
            if name == "deep JSON":
                return _answer(port, "/label", b"[" * 60_000, {}) == 400
            if name == "a body shorter than its Content-Length":
                return _short_body(port, "/label") == 400
            body = {"experiment": "exp_000", "scenario": entry["id"], "iteration": 1, "check": 0, "verdict": "right"}
            wrong = {"a list": "- a\n", "examples as a mapping": "examples: {a: 1}\n", "a scalar": "notes\n",
                     "examples of strings": "examples: [a]\n", "criteria as a list": "criteria: [a]\n",
                     "invalid YAML": "examples: [\n"}
            labels = results / "exp_000.labels.yaml"
            labels.write_text(wrong[name])
            answer = _answer(port, "/label", json.dumps(body).encode(), {})
            return answer == 400 and labels.read_text() == wrong[name]
        finally:
            server.shutdown()
            server.server_close()
    return probe


def _free_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return int(free.getsockname()[1])


def _two_servers(tmp: Path) -> bool:
    """Two ``fabtest view`` processes on one results folder, 16 marks each at once: all 32 kept."""
    import time

    from fabtest.view.labels import judged_checks, read_labels

    results = _results(tmp, 2)
    runs = json.loads((results / "exp_001.json").read_text())["scenario_results"]
    marks = [(x["id"], x["iteration"], index) for x in runs for index, _ in judged_checks(x)]
    ports = [_free_port(), _free_port()]
    views = [subprocess.Popen([sys.executable, "-m", "fabtest.cli", "view", str(results), "--no-open", "--port",
                               str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) for port in ports]
    statuses: list[int | str] = []

    def post(to: int, part: list[tuple[str, int, int]]) -> None:
        for sid, iteration, check in part:
            statuses.append(_answer(to, "/label", json.dumps({"experiment": "exp_001", "scenario": sid,
                                                              "iteration": iteration, "check": check,
                                                              "verdict": "right"}).encode(), {}))
    try:
        for view in views:
            assert view.stdout is not None
            view.stdout.readline()  # "serving ... at URL": it listens
        time.sleep(0.2)
        threads = [threading.Thread(target=post, args=(port, marks[i::2])) for i, port in enumerate(ports)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for view in views:
            view.terminate()
            view.wait(30)
    kept = read_labels(results / "exp_001.labels.yaml")
    print(f"  two view processes: {statuses.count(200)} of {len(marks)} marks answered 200, {len(kept)} kept")
    return statuses.count(200) == len(marks) == 32 and len(kept) == len(marks)


def _broken_file_build(tmp: Path) -> bool:
    """An invalid labels file: `fabtest view --build` still writes the experiment's pages."""
    results = _results(tmp, 1)
    (results / "exp_000.labels.yaml").write_text("examples: [\n")
    done = subprocess.run([sys.executable, "-m", "fabtest.cli", "view", str(results), "--build", str(tmp / "site")],
                          cwd=tmp, capture_output=True, text=True, timeout=120)
    return done.returncode == 0 and "Traceback" not in done.stderr and (tmp / "site/exp/exp_000.html").exists()


def _hand_written(tmp: Path) -> bool:
    from fabtest.judging.calibrate import load_examples
    from fabtest.view.labels import label_check

    path = tmp / "exp_x.labels.yaml"
    path.write_text("# mine\ncriteria:\n  tone: The agent stays calm\nexamples:\n"
                    "  - {criterion: tone, response: 'Calm down.', verdict: failed}\n")
    head = {"experiment": {"id": "exp_x"}, "configuration": {"criteria": {"c": "Warm"}}}
    entry = {"id": "s", "evaluations": [{"type": "satisfy", "criterion": "c", "status": "passed", "turn": 1}],
             "transcript": [{"number": 1, "user": "hi", "agent": "yo"}]}
    label_check(tmp, head, entry, 0, right=True, comment="x\x85y\u2028z\u2029w")
    examples = load_examples(path, {})
    return (path.read_text().startswith("# mine\n") and examples[0].description == "The agent stays calm"
            and examples[1].comment == "x\x85y\u2028z\u2029w")


# -- class 2: secrets in the new outputs --------------------------------------------------------------
def _secret_in_label(tmp: Path) -> bool:
    from fabtest._internal import redaction
    from fabtest.view.labels import label_check

    redaction.register("sk-breakit-0123456789")
    try:
        head = {"experiment": {"id": "exp_s"}, "configuration": {}}
        entry = {"id": "s", "evaluations": [{"type": "satisfy", "criterion": "c", "status": "passed", "turn": 1}],
                 "transcript": [{"number": 1, "user": "hi", "agent": "key sk-breakit-0123456789"}]}
        label = label_check(tmp, head, entry, 0, right=True, comment="sk-breakit-0123456789")
        return "sk-breakit" not in json.dumps(label) + (tmp / "exp_s.labels.yaml").read_text()
    finally:
        redaction.clear()


def _secret_in_answer(tmp: Path) -> bool:
    """A key the results file holds (written before it was one) is not in the POST /label answer."""
    from fabtest._internal import redaction

    server, port, results, entry = _view_server(tmp)
    key = "sk-answer-0123456789"
    redaction.register(key)
    try:
        body = {"experiment": "exp_000", "scenario": entry["id"], "iteration": 1, "check": 0, "verdict": "wrong",
                "comment": f"leaked {key}"}
        answer = httpx.post(f"http://127.0.0.1:{port}/label", json=body, timeout=30)
        return answer.status_code == 200 and key not in answer.text
    finally:
        redaction.clear()
        server.shutdown()
        server.server_close()


def _var_in_view_build(tmp: Path) -> bool:
    """A ``${VAR}`` value of the project's agent tables, in a results file, is not in `fabtest view --build`."""
    token = "tok-build-0123456789"
    results = _results(tmp, 1)
    path = results / "exp_000.json"
    path.write_text(path.read_text().replace("reply of experiment 0", f"reply of experiment 0 {token}"))
    (tmp / "pyproject.toml").write_text('[tool.fabtest.agents.remote]\ntype = "http"\n'
                                        'url = "http://127.0.0.1:9/chat?token=${BUILD_TOKEN}"\n')
    env = {**os.environ, "BUILD_TOKEN": token}
    subprocess.run([sys.executable, "-m", "fabtest.cli", "view", str(results), "--build", str(tmp / "site")], cwd=tmp,
                   env=env, capture_output=True, timeout=120)
    from fabtest.view.packs import unpack_script

    runs = json.dumps(unpack_script((tmp / "site" / "exp" / "exp_000" / "runs.js").read_text()))
    return "reply of experiment 0" in runs and token not in runs


# -- class 1: shrink (records through pytest in a subprocess) ------------------------------------------
SHRINK_AGENT = '''
import fabtest

@fabtest.tool
def delete_account(account: str) -> dict:
    return {"deleted": account}

def build(context):
    def chat(messages):
        if "close" in messages[-1].content.lower():
            delete_account("A-1")
            return "Done."
        return "How can I help?"
    return chat
'''


def _shrink(tmp: Path) -> bool:
    """An 8-turn simulated run failing `must not include a call` shrinks to 1-3 turns failing the same way,
    and the LLM key of the recorded line is not in the written feature."""
    (tmp / "bank.py").write_text(SHRINK_AGENT)
    lines = ["Hello.", "A question.", "Savings.", "Close it, key sk-shrink-0123456789 now.", "Thanks.", "More?", "No.",
             "Bye."]
    (tmp / "fake.yaml").write_text("simulated_user:\n" + "".join(f"  - {json.dumps(x)}\n" for x in lines))
    (tmp / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n[tool.fabtest]\n'
                                        'agent = "bank:build"\nresults_dir = "results"\noffline_llm = "fake.yaml"\n')
    (tmp / "bank.feature").write_text('Feature: B\n  Scenario: Never delete\n    Given a simulated user with the goal '
                                      '"Ask"\n    And the simulation takes at most 10 turns\n    When the simulated '
                                      'user talks to the agent\n    Then the conversation must not include a call to '
                                      '"delete_account"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "PYTEST_ADDOPTS")}
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--fabtest-no-preflight"]
    subprocess.run([*run, "bank.feature"], cwd=tmp, env=env, capture_output=True, timeout=120)
    exp = next((tmp / "results").glob("exp_*.json")).stem
    env["GEMINI_API_KEY"] = "sk-shrink-0123456789"
    env["GOOGLE_GEMINI_BASE_URL"] = "http://127.0.0.1:9"
    subprocess.run([sys.executable, "-m", "fabtest.cli", "shrink", exp, "Never delete", "-o", "s.feature"], cwd=tmp,
                   env=env, capture_output=True, timeout=120)
    text = (tmp / "s.feature").read_text() if (tmp / "s.feature").exists() else ""
    turns = text.count("When the user says")
    del env["GEMINI_API_KEY"]
    again = subprocess.run([*run, "s.feature"], cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    return 1 <= turns <= 3 and "sk-shrink" not in text and "called delete_account" in again.stdout


PROBES: dict[str, list[Probe]] = {
    "1 shrink": [("8-turn simulated run, must not include a call", _shrink)],
    "2 secrets": [("a key in a label and its file", _secret_in_label),
                  ("a key in the POST /label answer", _secret_in_answer),
                  ("a ${VAR} value in fabtest view --build", _var_in_view_build)],
    "3 review labels": [("two fabtest view processes, 32 marks at once", _two_servers),
                        ("hand-written criterion, comment, NEL/LS/PS", _hand_written),
                        ("view --build over an invalid labels file", _broken_file_build),
                        *((f"labels file: {n}", _view(n)) for n in ("a list", "examples as a mapping", "a scalar",
                                                                    "examples of strings", "criteria as a list",
                                                                    "invalid YAML"))],
    "4 hostile input": [*((f"import: {n}", _import_refuses(d)) for n, d in HOSTILE_FILES.items()),
                        ("import: deep JSON", _import_refuses(None, "[" * 200_000)),
                        *((f"import keeps: {n}", _import_keeps(t)) for n, t in ODD_LINES.items()),
                        *((f"OTLP: {n}", _otlp(n)) for n in OTLP_BODIES if not n.startswith("gzip bomb")),
                        ("OTLP: a body shorter than its Content-Length", _otlp("a body shorter than its Content-Length")),
                        ("view: deep JSON", _view("deep JSON")),
                        ("view: a body shorter than its Content-Length", _view("a body shorter than its Content-Length"))],
    "5 resources": [("OTLP: gzip bomb, 2 MB to 2 GB", _otlp("gzip bomb, 2 MB to 2 GB")),
                    ("OTLP: 5,000 foreign traces during a turn", _flood)],
}


def main() -> int:
    from tabulate import tabulate

    only = sys.argv[1] if len(sys.argv) > 1 else ""  # a part of the probes' names: run only those
    rows, failed = [], []
    for group, probes in PROBES.items():
        probes = [(name, probe) for name, probe in probes if only in name]
        handled = 0
        for name, probe in probes:
            with tempfile.TemporaryDirectory(prefix="fabtest-breakit-") as tmp:
                try:
                    ok = probe(Path(tmp))
                except Exception as exc:  # noqa: BLE001 - a probe that crashes fabtest is not handled
                    ok, name = False, f"{name} ({type(exc).__name__}: {exc})"
            handled += ok
            if not ok:
                failed.append(f"{group}: {name}")
        rows.append([group, len(probes), handled])
    rows.append(["total", sum(r[1] for r in rows), sum(r[2] for r in rows)])
    print(tabulate(rows, headers=["class", "probes", "handled"]))
    for line in failed:
        print(f"not handled: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
