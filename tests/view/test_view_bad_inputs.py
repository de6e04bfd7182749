"""``fabtest view`` against hostile requests and odd results directories (issue 30): only the Host
names it serves are answered (DNS rebinding), an empty directory or one holding only shard parts or
files that are not experiments builds and serves, and a port out of range is a usage error."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from view_fixtures import results_dir

from fabtest.cli import main
from fabtest.view.catalog import Catalog
from fabtest.view.server import make_server
from fabtest.view.site import Site


@pytest.fixture
def served(tmp_path: Path):
    server = make_server(results_dir(tmp_path, count=2))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1.nip.io:{port}",
                                  "localhost.evil.example:{port}", "127.0.0.1:{other}", "0.0.0.0:{port}", ""])
def test_a_request_for_another_host_name_is_refused(served: int, host: str) -> None:
    """A page on evil.example whose name rebinds to 127.0.0.1 sends ``Host: evil.example``: it gets
    no transcript."""
    with httpx.Client(base_url=f"http://127.0.0.1:{served}", timeout=10) as client:
        response = client.get("/", headers={"Host": host.format(port=served, other=served + 1)})
    assert response.status_code == 421
    assert "scenario" not in response.text and "127.0.0.1:PORT" in response.text


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LocalHost:{port}"])
def test_the_names_it_serves_are_answered(served: int, host: str) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{served}", timeout=10) as client:
        response = client.get("/", headers={"Host": host.format(port=served)})
    assert response.status_code == 200 and 'class="exp"' in response.text


def _fill(root: Path, kind: str) -> Path:
    out = root / "results"
    out.mkdir()
    if kind == "shard parts only":
        for worker in ("gw0", "gw1"):
            (out / f"exp_a.part-{worker}.json").write_text(json.dumps({"shard": worker}), encoding="utf-8")
    elif kind == "unreadable only":
        (out / "garbage.json").write_bytes(b"\xff\xfe not json")
        (out / "dir.json").mkdir()
        (out / "dangling.json").symlink_to(root / "nowhere.json")
        (out / "list.json").write_text("[1, 2]", encoding="utf-8")
    return out


@pytest.mark.parametrize("kind", ["empty", "shard parts only", "unreadable only"])
def test_a_results_dir_without_experiments_builds_and_serves(tmp_path: Path, kind: str, capsys) -> None:
    out = _fill(tmp_path, kind)
    assert main(["view", str(out), "--build", str(tmp_path / "site")]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert "No experiment to chart yet" in (tmp_path / "site" / "trends.html").read_text(encoding="utf-8")
    site = Site(Catalog(out))
    for path in ("/", "/trends.html", "/trends-commit.html"):
        page = site.render(path)
        assert page is not None and page.body


@pytest.mark.parametrize("port", ["-1", "70000", "65536", "http"])
def test_a_port_out_of_range_is_a_usage_error(port: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["view", "--port", port, "--no-open"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "Traceback" not in err and "OverflowError" not in err


def test_skipped_files_are_named_on_the_list_page_not_only_on_the_terminal(tmp_path: Path, capsys) -> None:
    """Issue 31: a results file that is not a readable experiment is named, with why, on the page a
    person reads (served and built), and warned about on stderr once, not on every request."""
    out = results_dir(tmp_path, count=2)
    (out / "garbage.json").write_bytes(b"\xff\xfe not json")
    (out / "list.json").write_text("[1, 2]", encoding="utf-8")
    site = Site(Catalog(out))
    for _ in range(3):
        page = site.render("/")
        assert page is not None
    html = page.body.decode()
    panel = html[html.index('id="skipped"'):]
    assert "2 files skipped" in panel and "<code>garbage.json</code>" in panel and "<code>list.json</code>" in panel
    assert html.count('class="exp"') == 2  # the experiments are still listed
    err = capsys.readouterr().err
    assert err.count("skipping") == 2 and "garbage.json" in err
    assert main(["view", str(out), "--build", str(tmp_path / "site")]) == 0
    assert "2 files skipped" in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    (out / "garbage.json").unlink()
    (out / "list.json").unlink()
    again = site.render("/")
    assert again is not None and b'id="skipped"' not in again.body
