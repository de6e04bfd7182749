"""The pages of one experiment: its report with a filterable scenario list, and a page per
conversation (each turn with its tool calls, the checks on it with the judge's reasoning, topic,
latency and cost)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fabtest.experiment.cost import agent_turn_lines, find_price, price_table
from fabtest.experiment.fmt import num, pct, usd
from fabtest.experiment.pauses import pause_line
from fabtest.report.html import experiment_sections, page_header
from fabtest.report.html_parts import steps_list
from fabtest.view.files import file_links, voice_side
from fabtest.view.labels import judged_checks
from fabtest.view.layout import as_dict, conversation_path, e, experiment_path, link, page
from fabtest.view.packs import pack_key, pack_path

__all__ = ["conversation_page", "conversation_parts", "data_attrs", "experiment_page", "failed_criteria_of",
           "run_filters", "tools_called"]

_ICONS = {"passed": "✓", "failed": "✗", "inconclusive": "?", "not_applicable": "n/a", "skipped": "–"}


def _status(entry: Mapping[str, Any]) -> str:
    if entry.get("skipped"):
        return "skipped"
    return "passed" if entry.get("passed") else "failed"


def _badge(entry: Mapping[str, Any]) -> str:
    status = _status(entry)
    cls = {"passed": "b-pass", "failed": "b-fail", "skipped": "b-skip"}[status]
    text = status.upper() + (f" · {entry.get('failure_type') or 'assertion'}" if status == "failed" else "")
    return f'<span class="badge {cls}">{e(text)}</span>'


def _flaky(doc: Mapping[str, Any]) -> tuple[set[str], dict[str, dict[str, Any]]]:
    """The flaky scenario ids and their attributed cause (``variance.flaky_causes``)."""
    var = as_dict(doc.get("variance"))
    causes = {str(c.get("id")): c for c in var.get("flaky_causes") or [] if isinstance(c, dict)}
    return {str(i) for i in var.get("flaky") or []}, causes


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def experiment_page(doc: dict[str, Any], changed: Mapping[str, str] | None = None, previous: str = "",
                    review: str = "") -> str:
    """The report's content, then every scenario with its runs grouped under it (pass count, mean
    evaluation rate), filters (failed, flaky, failure type, changed, text in the transcripts),
    sortable columns and a link to each conversation. ``changed``: scenario id -> how it changed
    against ``previous`` (the experiment before it on its branch), when there is one."""
    exp_id = str(doc["experiment"].get("id"))
    entries = [x for x in doc.get("scenario_results") or [] if isinstance(x, dict)]
    flaky, causes = _flaky(doc)
    types = sorted({str(x.get("failure_type") or "assertion") for x in entries if _status(x) == "failed"})
    failed_criteria = {id(x): sorted(failed_criteria_of(x)) for x in entries}
    tools_of = {id(x): sorted(tools_called(x)) for x in entries}
    all_criteria = sorted({c for v in failed_criteria.values() for c in v})
    all_tools = sorted({c for v in tools_of.values() for c in v})
    groups: dict[str, list[dict[str, Any]]] = {}
    for x in entries:
        groups.setdefault(str(x.get("id")), []).append(x)
    bodies = []
    for sid, runs in groups.items():
        cause = causes.get(sid)
        why = f"{cause.get('cause')}: {cause.get('evidence')}" if cause else ""
        passed = sum(1 for x in runs if _status(x) == "passed")
        counted = sum(1 for x in runs if _status(x) != "skipped")
        rates = [float(r) for x in runs if isinstance(r := as_dict(x.get("evaluations")).get("rate"), (int, float))]
        turns = [float(x.get("turns") or 0) for x in runs]
        name = str(runs[0].get("name") or sid)
        change = (changed or {}).get(sid, "")
        badges = (' <span class="badge b-warn">flaky</span>' if sid in flaky else "") + (
            f' <span class="badge b-skip">{e(change)} vs {e(previous)}</span>' if change else "")
        keys = [passed / counted if counted else -1, name.lower(), len(runs), _mean(turns) or 0, _mean(rates) or -1,
                next((str(x.get("failure_message")) for x in runs if x.get("failure_message")), ""), why]
        sort_attrs = "".join(f' data-s{i}="{e(k)}"' for i, k in enumerate(keys))
        tone = "b-pass" if passed == counted and counted else "b-fail" if counted else "b-skip"
        head = (f'<tr class="sgroup"><td><span class="badge {tone}">'
                f"{passed}/{counted} passed</span></td><th scope=\"rowgroup\">{e(name)}{badges}</th>"
                f'<td class="num">{len(runs)} run{"s" if len(runs) != 1 else ""}</td>'
                f'<td class="num">{e(num(_mean(turns)))}</td>'
                f'<td class="num">{e(pct(_mean(rates)))}</td><td></td><td class="muted">{e(why)}</td></tr>')
        rows = []
        for x in runs:
            it = x.get("iteration") or 1
            ev = as_dict(x.get("evaluations"))
            failure = str(x.get("failure_type") or "assertion") if _status(x) == "failed" else ""
            attrs = data_attrs(flaky="1" if sid in flaky else "", failure=failure, changed="1" if change else "",
                          criteria=chr(10).join(failed_criteria[id(x)]), tools=chr(10).join(tools_of[id(x)]))
            rows.append(
                # no data-runs: view.js reads the run from its link (class run), as on a comparison
                f'<tr class="scn" data-status="{_status(x)}"{attrs}>'
                f"<td>{_badge(x)}</td>"
                f"<td>{link('../', conversation_path(exp_id, sid, it), f'{name} · run {it}', 'run')}</td>"
                f'<td class="num">{e(it)}</td><td class="num">{e(x.get("turns") or 0)}</td>'
                f'<td class="num">{e(pct(ev.get("rate")))}</td><td>{e(x.get("failure_message") or "")}</td>'
                '<td></td></tr>'
            )
        bodies.append(f'<tbody class="group"{sort_attrs}>{head}{"".join(rows)}</tbody>')
    filters = run_filters([(exp_id, "../")], types, all_criteria, all_tools,
                          changed=f"changed vs {previous} only" if changed is not None else None)
    heads = ["Status", "Scenario", "Run", "Turns", "Eval rate", "Failure", "Flaky attribution"]
    th = "".join(f'<th scope="col"{" class=num" if 2 <= i <= 4 else ""}>'
                 f'<button type="button" class="sort" data-col="{i}">{h}</button></th>'
                 for i, h in enumerate(heads))
    table = (f'<div class="panel"><table id="scenarios" class="sortable"><thead><tr>{th}</tr></thead>'
             f'{"".join(bodies)}</table></div>')
    body = (experiment_sections(doc) + review
            + f"<h2>Scenarios ({len(groups)} scenarios, {len(entries)} runs)</h2>{filters}{table}"
            + '<p class="muted">Runs are grouped under their scenario; '
            'click a column title to sort the scenarios by it.</p>')
    header = page_header(doc, f"Experiment {exp_id}")
    return page(f"fabtest view · {exp_id}", "../", body, header)


def run_filters(sources: list[tuple[str, str]], types: Sequence[str] = (), criteria: Sequence[str] = (),
                tools: Sequence[str] = (), *, changed: str | None = None, flaky: bool = True,
                failed: str = "failed only") -> str:
    """The filter bar over a table of runs (``tr.scn``; view.js applies it): search the transcripts
    of ``sources`` (experiment id, root prefix: their ``runs.js`` is loaded on the first word
    typed; a row's ``a.run`` links name its runs: the link's folder is its experiment's, where
    its pack is), failed, flaky, changed (``changed``: the box's label), failure type,
    failed criterion, called tool. The experiment page and the comparison page share it."""
    packs = [[root + pack_path(exp), pack_key(exp)] for exp, root in sources]

    def select(ident: str, label: str, anything: str, values: list[str]) -> str:
        if not values:
            return ""
        options = "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in values)
        return f'<label>{label} <select id="{ident}"><option value="">{anything}</option>{options}</select></label>'

    return (
        f'<div class="filters" id="scenario-filters" data-sources="{e(json.dumps(packs))}">'
        '<label>Search transcripts '
        '<input type="search" id="f-text" placeholder="words from a message or a tool call"></label>'
        f'<label><input type="checkbox" id="f-failed"> {e(failed)}</label>'
        + ('<label><input type="checkbox" id="f-flaky"> flaky only</label>' if flaky else "")
        + (f'<label><input type="checkbox" id="f-changed"> {e(changed)}</label>' if changed is not None else "")
        + select("f-failure", "Failure type", "any failure type", list(types))
        + select("f-criterion", "Failed criterion", "any", list(criteria))
        + select("f-tool", "Called tool", "any", list(tools))
        + '<span class="muted" id="f-count" role="status"></span></div>'
    )


def data_attrs(**values: str) -> str:
    """``data-*`` attributes, the empty ones left out (view.js reads a missing one as empty): a
    static build has hundreds of these tables."""
    return "".join(f' data-{k}="{e(v)}"' for k, v in values.items() if v)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def _turn_cost(metadata: Any, prices: Mapping[str, Any]) -> str:
    """The agent's tokens on this turn and their price (judge and simulator are costed per scenario)."""
    lines = agent_turn_lines(metadata if isinstance(metadata, Mapping) else None)
    if not lines:
        return ""
    table = price_table({m: p for m, p in prices.items() if isinstance(p, Mapping)})
    total: float | None = 0.0
    inp = out = 0
    for model, _calls, i, o in lines:
        inp, out = inp + i, out + o
        price = find_price(table, model)
        total = None if price is None or total is None else total + price.usd(i, o)
    return f" · agent tokens {inp} in / {out} out · {usd(total)}"


def _label_form(index: int | None, legend: str = "Is the judge right?") -> str:
    """Right / wrong and a comment on one judged check (``index``) or on the whole run (None); shown
    by view.js only when served (a static build cannot save), posted to ``label`` and saved in
    ``<id>.labels.yaml``."""
    target = f'data-check="{index}"' if index is not None else 'data-kind="conversation"'
    return (f'<form class="label-form" hidden {target}><fieldset><legend>{e(legend)}</legend>'
            '<button type="submit" value="right">right</button> <button type="submit" value="wrong">wrong</button> '
            '<label>Comment <input type="text" name="comment" maxlength="2000"></label> '
            '<span class="saved" role="status"></span></fieldset></form>')


def _label_note(label: Mapping[str, Any] | None) -> str:
    """A label already saved (``<id>.labels.yaml``): the person's mark, verdict and comment."""
    if not label:
        return ""
    mark = "right" if label.get("verdict") == label.get("judge") else "wrong"
    comment = f" · “{e(label.get('comment'))}”" if label.get("comment") else ""
    return (f'<div class="labelled muted">labelled <b>{mark}</b> (the person says {e(label.get("verdict"))})'
            f"{comment}</div>")


def _check_rows(checks: list[Mapping[str, Any]], labelable: Mapping[int, int] | None = None,
                labels: Mapping[Any, Mapping[str, Any]] | None = None, editable: bool = True) -> str:
    out = []
    for c in checks:
        index = (labelable or {}).get(id(c))
        form = ((_label_form(index) if editable else "") + _label_note((labels or {}).get(index))
                if index is not None else "")
        status = str(c.get("status") or "skipped")
        data = {k: v for k, v in c.items()
                if k not in ("type", "mode", "criterion", "status", "passed", "turn", "details")}
        extra = f'<pre class="data">{e(_json(data))}</pre>' if data else ""
        out.append(
            f'<div class="check c-{e(status)}"><span class="icon i-{e(status)}">{_ICONS.get(status, "?")}</span>'
            f'<b>{e(c.get("criterion"))}</b> '
            f'<span class="muted">{e(c.get("mode"))} · {e(c.get("type"))} · {e(status)}</span>'
            f'<div class="reason">{e(c.get("details") or "")}</div>{extra}{form}</div>'
        )
    return "".join(out)


def _details(block: Any) -> list[Mapping[str, Any]]:
    details = block.get("details", []) if isinstance(block, dict) else block
    return [d for d in details or [] if isinstance(d, dict)]


def failed_criteria_of(run: Mapping[str, Any]) -> set[str]:
    """The criteria and checks a run failed (what the failed-criterion filter matches)."""
    return {str(c.get("criterion")) for c in _details(run.get("evaluations")) + _details(run.get("expectations"))
            if c.get("status") == "failed"}


def tools_called(run: Mapping[str, Any]) -> set[str]:
    """The tools a run called (what the tool filter matches)."""
    return {str(c.get("name")) for t in run.get("transcript") or [] if isinstance(t, dict)
            for c in t.get("tool_calls") or [] if isinstance(c, dict)}


def _simulated_user(entry: Mapping[str, Any]) -> str:
    """The simulated user's goal, persona, facts and rules (``entry.simulator``), shown beside the
    transcript: what the user was trying to do explains most of what it said."""
    sim = as_dict(entry.get("simulator"))
    facts = as_dict(sim.get("facts"))
    rows = [("Goal", sim.get("goal")), ("Persona", sim.get("persona")),
            ("Facts", "; ".join(f"{k}: {v}" for k, v in facts.items())),
            ("Should", "; ".join(str(r) for r in sim.get("rules_should") or [])),
            ("Should not", "; ".join(str(r) for r in sim.get("rules_should_not") or []))]
    shown = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows if v)
    return (f'<aside class="panel simuser" id="simulated-user"><h2>Simulated user</h2><dl>{shown}</dl></aside>'
            if shown else "")


def _production(entry: Mapping[str, Any]) -> str:
    """Where a production run's conversation was logged, and its regression scenario when one was
    imported (``regression``: the feature, and the site path of its newest run, added by the site)."""
    logged = as_dict(entry.get("production"))
    if not logged:
        return ""
    text = (f'<b>Logged conversation {e(logged.get("conversation"))}</b> '
            f'<span class="muted">({e(logged.get("timestamp") or "no time logged")}, {e(logged.get("format"))}, '
            f'<code>{e(logged.get("source"))}</code>)</span>')
    regression = as_dict(logged.get("regression"))
    if regression.get("path"):
        text += (" · " + link("../../", str(regression["path"]), "its regression scenario")
                 + f' <span class="muted">(<code>{e(regression.get("feature"))}</code>)</span>')
    elif regression:
        text += (f' · imported as <code>{e(regression.get("feature"))}</code>, not run yet '
                 f'(<code>pytest {e(regression.get("feature"))}</code>)')
    return f'<div class="panel" id="production">{text}</div>'


def _steps(entry: Mapping[str, Any]) -> str:
    """The feature's steps as written (``entry.steps``), beside the transcript: what the scenario
    asked for, so a failing check reads against the line that declared it."""
    shown = steps_list(entry)
    return f'<aside class="panel steps" id="steps"><h2>Steps</h2>{shown}</aside>' if shown else ""


def _run_label(entry: Mapping[str, Any], label: Mapping[str, Any] | None, editable: bool) -> str:
    """The mark on the whole run: is its outcome right? (a conversation label, docs/view.md)."""
    if entry.get("skipped") or not entry.get("transcript") or not (editable or label):
        return ""
    outcome = "passed" if entry.get("passed") else "failed"
    form = _label_form(None, f"Is “{outcome}” right for the whole conversation?") if editable else ""
    return f'<div class="panel" id="run-label"><b>This run {outcome}.</b> {form}{_label_note(label)}</div>'


def conversation_page(head: Mapping[str, Any], entry: Mapping[str, Any],
                      related: list[tuple[str, str]] | None = None,
                      labels: list[dict[str, Any]] | None = None) -> str:
    """The page of :func:`conversation_parts`."""
    return page(*conversation_parts(head, entry, related, labels))


def conversation_parts(head: Mapping[str, Any], entry: Mapping[str, Any],
                       related: list[tuple[str, str]] | None = None,
                       labels: list[dict[str, Any]] | None = None,
                       editable: bool = True) -> tuple[str, str, str, str]:
    """One scenario run (``entry``) of the experiment whose header is ``head``: every turn with
    the agent's tool calls and results, the checks decided on it (verdict and the judge's
    reasoning), its topic, the agent's latency and cost; the simulated user's goal and persona;
    ``related``: (site path, text) of the same scenario elsewhere (other iterations, the experiment
    before this one on its branch); ``labels``: the run's labels so far (``<id>.labels.yaml``).
    Returns the page's title, root, body and header (a static build packs them, ``packs.py``).
    ``editable``: the right / wrong controls (False in a static build, which cannot save; labels
    already made are shown either way)."""
    exp_id = str(head["experiment"].get("id"))
    checks = _details(entry.get("evaluations")) + _details(entry.get("expectations"))
    labelable = {id(c): i for i, c in judged_checks(entry)}
    mine = [x for x in labels or [] if x.get("scenario") == entry.get("id")
            and int(x.get("iteration") or 1) == int(entry.get("iteration") or 1)]
    by_check = {x.get("check"): x for x in mine if x.get("kind") != "conversation"}
    whole_label = next((x for x in mine if x.get("kind") == "conversation"), None)
    prices = as_dict(as_dict(as_dict(head.get("summary")).get("cost")).get("prices"))
    turns = [t for t in entry.get("transcript") or [] if isinstance(t, dict)]
    parts = []
    for t in turns:
        number = t.get("number")
        topic = f'<span class="topic">{e(t.get("topic"))}</span>' if t.get("topic") else ""
        if t.get("off_graph"):
            topic += '<span class="topic off">off-graph jump</span>'
        tools = "".join(
            f'<div class="tool"><b>{e(c.get("name"))}</b>'
            + (' <span class="muted">stubbed</span>' if c.get("stubbed") else "")
            + f'<pre>{e(_json(c.get("arguments", {})))}</pre>'
            + (f'<div class="result">→ <pre>{e(_json(c.get("result")))}</pre></div>'
               if c.get("result") is not None else "")
            + (f'<div class="muted meta">{e(_json(c.get("metadata")))}</div>' if c.get("metadata") else "") + "</div>"
            for c in t.get("tool_calls") or [] if isinstance(c, dict))
        on_turn = [c for c in checks if c.get("turn") == number]
        meta = f'<div class="muted meta">{e(_json(t.get("metadata")))}</div>' if t.get("metadata") else ""
        parts.append(
            f'<section class="turn" id="turn-{e(number)}"><div class="tn">Turn {e(number)}{topic}'
            f'<span class="muted"> · agent {e(num(t.get("duration_s"), 2))}s'
            f'{e(_turn_cost(t.get("metadata"), prices))}</span></div>'
            f'<div class="msg user"><span class="who">User</span>{e(t.get("user"))}'
            f'{file_links("../../", t.get("user_files"))}{voice_side("../../", t.get("voice"), "user")}</div>{tools}'
            f'<div class="msg agent"><span class="who">Agent</span>{e(t.get("agent"))}'
            f'{file_links("../../", t.get("agent_files"))}{voice_side("../../", t.get("voice"), "agent")}{meta}</div>'
            + "".join(f'<div class="tool pause"><b>paused</b> {e(pause_line(p))}</div>'
                      for p in t.get("pauses") or [] if isinstance(p, dict))
            + (f'<div class="checks">{_check_rows(on_turn, labelable, by_check, editable)}</div>' if on_turn else "")
            + "</section>"
        )
    numbers = {t.get("number") for t in turns}
    whole = [c for c in checks if c.get("turn") not in numbers]
    spent = as_dict(entry.get("cost"))
    facts = [("Status", _status(entry)), ("Run", entry.get("iteration") or 1), ("Turns", entry.get("turns") or 0),
             ("Duration", f"{num(entry.get('duration_s'), 2)}s"), ("Cost", usd(spent.get("usd")))]
    path = entry.get("topic_path") or []
    body = (
        '<div class="cards">'
        + "".join(f'<div class="card"><div class="k">{e(k)}</div><div class="v">{e(v)}</div></div>'
                  for k, v in facts) + "</div>"
        + (f'<div class="failure">{e(entry.get("failure_message"))}</div>' if entry.get("failure_message") else "")
        + (f'<p class="path muted">Topics: {" → ".join(f"<span class=topic>{e(p)}</span>" for p in path)}</p>'
           if path else "")
        + ('<nav class="related" id="related" aria-label="the same scenario elsewhere"><b>Same scenario:</b> '
           + " · ".join(link("../../", p, t) for p, t in related) + "</nav>" if related else "")
        + _production(entry) + _run_label(entry, whole_label, editable) + _simulated_user(entry) + _steps(entry)
        + (f'<div id="labeling" hidden data-experiment="{e(exp_id)}" data-scenario="{e(entry.get("id"))}" '
           f'data-iteration="{e(entry.get("iteration") or 1)}" data-endpoint="../../label"></div>' if editable else "")
        + "<h2>Conversation</h2>" + ("".join(parts) or '<p class="muted">No transcript recorded.</p>')
        + ('<h2>Checks on the whole conversation</h2>'
           f'<div class="checks">{_check_rows(whole, labelable, by_check, editable)}</div>' if whole else "")
    )
    header = (
        f'<header class="top"><div class="inner"><h1>{e(entry.get("name"))}</h1><div class="sub">'
        f'{e(entry.get("feature") or "")} · {e(entry.get("id"))} · experiment '
        f'{link("../../", experiment_path(exp_id), exp_id)}</div></div></header>'
    )
    return f"fabtest view · {entry.get('name')}", "../../", body, header
