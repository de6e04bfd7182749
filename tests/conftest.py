"""Import the HTTP stack once in the outer process, before any in-process pytester run.

pytester restores ``sys.modules`` after each inner run, so a module first imported inside one
(httpcore's backends, google-genai) is dropped and later imported again as new class objects,
while httpx keeps its exception map of the old ones: an ``httpcore.ReadTimeout`` would then
escape unmapped. Importing them here keeps one copy for the whole session.

Every child pytest run gets ``PYTEST_ADDOPTS`` from support/child.py: two plugins left out that
cost each child about a second and that no test uses.
"""

import os
from pathlib import Path  # noqa: E402

import google.genai  # noqa: F401
import httpcore  # noqa: F401
import httpcore._backends.sync  # noqa: F401
import httpx  # noqa: F401
import pytest  # noqa: E402
from support import child  # noqa: E402
from support.slow import is_slow  # noqa: E402

_TESTS = Path(__file__).parent

os.environ["PYTEST_ADDOPTS"] = child.ADDOPTS  # for the CLI and subprocess runs, which inherit it


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester's own, with the suite's ``PYTEST_ADDOPTS`` back (pytester removes it) for the runs it starts."""
    monkeypatch.setenv("PYTEST_ADDOPTS", child.ADDOPTS)
    return pytester


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tests (tests/support/slow.py lists them) so ``-m "not slow"`` is the inner loop."""
    for item in items:
        try:
            relative = item.path.relative_to(_TESTS).as_posix()
        except ValueError:
            continue
        if is_slow(relative, getattr(item, "originalname", item.name)):
            item.add_marker(pytest.mark.slow)
