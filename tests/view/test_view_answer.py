"""``fabtest view`` leads with the answer (issue 31 point 2): the comparison opens with the verdict
then what changed, with links to both sides' conversations; the list marks each experiment against
the one before it on its branch; a conversation links to the same scenario elsewhere and shows the
simulated user's goal and persona."""

from __future__ import annotations

import re

import pytest
from view_fixtures import results_dir

from fabtest.view.catalog import Catalog
from fabtest.view.layout import compare_path, conversation_path
from fabtest.view.scenarios import conversation_page
from fabtest.view.site import Site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return Site(Catalog(results_dir(tmp_path_factory.mktemp("answer"))))


def _text(site: Site, path: str) -> str:
    page = site.render(path)
    assert page is not None, path
    return page.body.decode()


def test_comparison_opens_with_the_verdict_then_what_changed_newly_failing_first(site: Site) -> None:
    html = _text(site, compare_path("exp_007", "exp_008"))
    verdict, changed, metrics = html.index('id="verdict"'), html.index('id="what-changed"'), html.index("Completion rate")
    assert verdict < changed < metrics
    panel = html[changed:html.index("</table>", changed)]
    rows = re.findall(r"<tr><td><span class=\"(\w+)\">([^<]+)</span></td><td>([^<]+)</td><td class=\"num\">([^<]+)</td>", panel)
    kinds = [k for _, k, _, _ in rows]
    assert kinds[:4] == ["newly failing"] * 4 and kinds.index("newly passing") > 3  # newly failing first
    assert ("down", "newly failing", "scenario 0", "2/2 → 0/2 runs") in rows  # before/after counts
    assert len({name for _, _, name, _ in rows}) == len(rows)  # each scenario once
    # links to a passing baseline run and a failing current run of each newly failing scenario, and they open
    first = panel[panel.index("scenario 0"):panel.index("</tr>", panel.index("scenario 0"))]
    links = re.findall(r'href="\.\./([^"]+)"', first)
    assert [p.split("/")[1] for p in links] == ["exp_007", "exp_008"]
    for path in links:
        assert site.render(path) is not None, path
    # the first differing turn of the diffed pair, inline under its scenario (escaped agent text)
    diff = panel[panel.index('<tr class="firstdiff">'):]
    diff = diff[:diff.index("</tr>")]
    assert panel.index("scenario 0") < panel.index('<tr class="firstdiff">') < panel.index("scenario 1")
    assert "first difference at turn 1, the agent&#x27;s response differs" in diff
    assert "reply of experiment 7” · current “" in diff and "reply of experiment 8”" in diff and "<img" not in diff


def test_a_comparison_where_nothing_changed_says_so(site: Site) -> None:
    html = _text(site, compare_path("exp_010", "exp_011"))
    assert "No scenario changed outcome or quality." in html[html.index('id="what-changed"'):]


def test_the_list_marks_each_experiment_against_the_one_before_it_on_its_branch(site: Site) -> None:
    html = _text(site, "index.html")
    change = dict(re.findall(r'data-id="([^"]+)"[^>]*data-change="([^"]*)"', html))
    # exp_008 (feature/tone) against exp_004, exp_009 (main) against exp_007: the regression; the first of each branch has none
    assert change["exp_008"] == "worse" and change["exp_009"] == "worse"
    assert change["exp_000"] == "" and change["exp_001"] == ""
    assert change["exp_010"] in ("not worse", "undecided") and change["exp_010"] != "worse"
    row = html[html.index('data-id="exp_008"'):html.index("</tr>", html.index('data-id="exp_008"'))]
    assert f'href="{compare_path("exp_004", "exp_008")}">compare with previous</a>' in row and "vs exp_004" in row


def test_a_conversation_links_the_other_iterations_and_the_previous_experiment(site: Site) -> None:
    sid = site.catalog.scenario_ids(site.catalog.rows()[9])[0]
    html = _text(site, conversation_path("exp_009", sid, 1))
    related = html[html.index('id="related"'):html.index("</nav>", html.index('id="related"'))]
    hrefs = re.findall(r'href="\.\./\.\./([^"]+)"', related)
    assert hrefs == [conversation_path("exp_009", sid, 2), conversation_path("exp_007", sid, 1), compare_path("exp_007", "exp_009")]
    assert all(site.render(h) is not None for h in hrefs)
    assert "run 2 (failed)" in related and "in exp_007 (previous on branch)" in related
    first = _text(site, conversation_path("exp_000", sid, 1))
    assert 'id="related"' not in first  # one run, nothing before it


def test_a_conversation_shows_the_simulated_users_goal_and_persona_before_the_transcript() -> None:
    head = {"experiment": {"id": "exp_x"}, "summary": {}}
    entry = {"id": "example:1", "name": "Book a room", "passed": True, "transcript": [{"number": 1, "user": "hi", "agent": "hello"}],
             "simulator": {"goal": "Book a room for <10> people", "persona": "A busy office manager",
                           "facts": {"city": "Berlin"}, "rules_should": ["answer briefly"], "rules_should_not": []}}
    html = conversation_page(head, entry)
    user = html[html.index('id="simulated-user"'):html.index("</aside>")]
    assert "<dt>Goal</dt><dd>Book a room for &lt;10&gt; people</dd>" in user
    assert "<dt>Persona</dt><dd>A busy office manager</dd>" in user and "city: Berlin" in user and "answer briefly" in user
    assert "Should not" not in user  # empty rows are left out
    assert html.index('id="simulated-user"') < html.index('id="turn-1"')
    assert 'id="simulated-user"' not in conversation_page(head, {**entry, "simulator": None})
