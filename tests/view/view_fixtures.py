"""A results directory of many experiments, built with the experiment tests' factories."""

from __future__ import annotations

from pathlib import Path

from support.experiments import make_doc, make_result

from fabtest.experiment.export import write_document
from fabtest.experiment.model import ToolCallRecord, TurnRecord

#: agent text that would run script if it were not escaped
HOSTILE = '<img src=x onerror="window.__xss=1"><script>window.__xss=1</script>'
NAMES = [f"scenario {i}" for i in range(8)]


def results_dir(root: Path, count: int = 12, regress_at: int = 8) -> Path:
    """``count`` experiments a day apart on two branches; from experiment ``regress_at`` on, the
    criterion "friendly" fails in most scenarios and two scenarios stop completing (the
    regression the gate must mark); most experiments ran 2 iterations (a spread)."""
    out = root / "results"
    for n in range(count):
        bad = n >= regress_at
        iterations = 2 if n % 5 else 1
        results = []
        for it in range(1, iterations + 1):
            for i, name in enumerate(NAMES):
                friendly = "failed" if (bad and i % 4 != 0) or (it == 2 and i == 7) else "passed"
                passed = not (bad and i < 4) and not (it == 2 and i == 5 and n % 3 == 1)  # scenario 5: flaky
                r = make_result(name, iteration=it, passed=passed, evals=[("friendly", friendly), ("concise", "passed")],
                                failure_type=None if passed else "max_turns")
                # its Gherkin steps (the conversation page's steps panel), one with text that must stay text
                r.steps = [{"keyword": "Given", "text": 'the agent "venue_bot"'},
                           {"keyword": "When", "text": 'the user says "hi"'},
                           {"keyword": "Then", "text": f'the response should not match "{HOSTILE if i == 0 else "rude"}"'}]
                if i == 0:
                    r.transcript[0] = TurnRecord(number=1, user="hi", agent=HOSTILE + f" reply of experiment {n}",
                                                 tool_calls=[ToolCallRecord(name="search_venues", arguments={"city": HOSTILE},
                                                                            result={"note": HOSTILE})],
                                                 topic="greeting", duration_s=0.25 + n / 10,
                                                 metadata={"model": "gemini-2.5-flash",
                                                           "usage": {"input_tokens": 1000, "output_tokens": 100}})
                results.append(r)
        doc = make_doc(f"exp_{n:03d}", results, name=f"prompt v{n} {HOSTILE if n == 3 else ''}".strip(),
                       tags=["nightly"] if n % 3 else ["nightly", "release"],
                       git_branch="main" if n % 4 else "feature/tone", git_commit=f"{n:02d}c0ffee{n:02d}deadbeef",
                       timestamp=f"2026-11-{n + 1:02d}T10:00:00Z", iterations=iterations)
        write_document(doc, out)
    return out
