"""The benchmarks checked without running them, in seconds: each has a ``--quick`` mode (which
test_benchmarks_quick.py runs), and what each takes from fabtest still exists."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def test_every_benchmark_has_a_quick_mode() -> None:
    missing = [p.name for p in sorted(BENCHMARKS.glob("bench_*.py"))
               if '"--quick"' not in p.read_text(encoding="utf-8")]
    assert not missing, f"give these a --quick smoke mode: {missing}"


def test_what_a_benchmark_takes_from_fabtest_exists() -> None:
    """In seconds, without running anything: every ``module.attr`` a benchmark reads off a fabtest
    module it imports names something that module has (``fake_gemini._Handler`` did not)."""
    import ast
    import importlib

    missing = []
    for path in sorted(BENCHMARKS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fabtest"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    try:
                        importlib.import_module(full)
                    except ImportError:
                        continue  # a class or function, not a module: the import itself checks it
                    modules[alias.asname or alias.name] = full
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                    and not hasattr(importlib.import_module(modules[node.value.id]), node.attr)):
                missing.append(f"{path.name}:{node.lineno}: {modules[node.value.id]}.{node.attr}")
    assert not missing, missing
