"""Issue 27 point 5: not-applicable verdicts are counted apart and shown, never rated; inconclusive
ones are shown beside the rates they are left out of (JSON and the console summary)."""

from support.experiments import make_doc, make_result

from fabtest.report.console import render_summary


def _doc() -> dict:
    results = [make_result("a", evals=[("offers a drink", "passed"), ("offers a drink", "not_applicable"),
                                       ("offers a drink", "not_applicable"), ("friendly", "passed"),
                                       ("friendly", "inconclusive")])]
    return make_doc("exp_na", results)


def test_the_json_counts_not_applicable_apart_from_the_rate() -> None:
    doc = _doc()
    drink = doc["criteria_results"]["offers a drink"]
    assert (drink["evaluated"], drink["passed"], drink["not_applicable"], drink["rate"]) == (1, 1, 2, 1.0)
    evaluations = doc["summary"]["evaluations"]
    assert evaluations["not_applicable"] == 2 and evaluations["inconclusive"] == 1 and evaluations["evaluated"] == 2
    [scenario] = doc["scenario_results"]
    assert scenario["evaluations"]["not_applicable"] == 2
    assert [d["passed"] for d in scenario["evaluations"]["details"] if d["status"] == "not_applicable"] == [None, None]


def test_the_console_shows_inconclusive_and_not_applicable_beside_each_criterions_rate() -> None:
    text = render_summary(_doc())
    assert "Not applicable:    2 (the criterion did not apply to what was judged; not rated)" in text
    block = text[text.index("By Criterion"):]
    header = next(line for line in block.splitlines() if "Criterion" in line and "Rate" in line)
    assert "Inconclusive" in header and "Not applicable" in header
    drink = next(line for line in block.splitlines() if line.strip().startswith("offers a drink"))
    assert drink.split()[-2:] == ["0", "2"]  # inconclusive 0, not applicable 2
    friendly = next(line for line in block.splitlines() if line.strip().startswith("friendly"))
    assert friendly.split()[-2:] == ["1", "0"]


def test_the_html_report_says_how_many_were_not_applicable() -> None:
    from fabtest.report.html import render_experiment_html

    assert "2 evaluation(s) were not applicable" in render_experiment_html(_doc())


def test_the_html_report_and_the_view_have_a_column_per_unrated_verdict() -> None:
    """The criterion table of the report (and of fabtest view's experiment page, which shows the same
    section) counts inconclusive and not-applicable verdicts beside each rate, as the console does."""
    import re

    from fabtest.report.html import render_experiment_html
    from fabtest.view.scenarios import experiment_page

    for page in (render_experiment_html(_doc()), experiment_page(_doc())):
        table = page[page.index("Quality by criterion"):]
        table = table[table.index("<table"):table.index("</table>")]
        assert "<th>Inconclusive</th>" in re.sub(r"<th[^>]*>", "<th>", table)
        cells = lambda name: re.findall(r"<td[^>]*>([^<]*)</td>",  # noqa: E731
                                        table[table.index(name):].split("</tr>")[0])
        assert cells("offers a drink")[-2:] == ["0", "2"] and cells("friendly")[-2:] == ["1", "0"]
