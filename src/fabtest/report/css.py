"""The stylesheet every HTML page of fabtest shares (the reports and ``fabtest view``).

Kept apart from :mod:`fabtest.report.html` so the page builders stay short; a rule too long for
one line goes on with a backslash, which keeps the CSS text itself unchanged.
"""

from __future__ import annotations

__all__ = ["REPORT_CSS"]

REPORT_CSS = """
:root{--fg:#212529;--muted:#5c656d;--line:#e9ecef;--bg:#f8f9fa;--card:#fff;--ok:#237032;--bad:#c92a2a;
--warn:#a65300;--info:#1864ab}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);\
font:14px/1.5 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px}
header.top{background:#1b2430;color:#fff;padding:22px 28px}
header.top .inner{max-width:1180px;margin:0 auto}
header.top h1{margin:0 0 4px;font-size:22px;font-weight:600}
header.top .sub{color:#adb5bd;font-size:13px}
header.top .meta{display:flex;flex-wrap:wrap;gap:6px 22px;margin-top:12px;font-size:13px;color:#dee2e6}
header.top .meta b{color:#fff;font-weight:600}
h2{font-size:17px;margin:30px 0 12px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:18px 0 8px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 16px}
.card .k{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:26px;font-weight:650;margin-top:2px}
.card .n{color:var(--muted);font-size:12px}
.panel{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:16px 18px;margin-bottom:14px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.03em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.b-pass{background:#ebfbee;color:var(--ok)}.b-fail{background:#fff5f5;color:var(--bad)}
.b-skip{background:#f1f3f5;color:var(--muted)}.b-warn{background:#fff9db;color:var(--warn)}
.b-HIGH{background:#ebfbee;color:var(--ok)}.b-MEDIUM{background:#fff9db;color:var(--warn)}.b-LOW{background:#fff5f5;\
color:var(--bad)}
.up{color:var(--ok);font-weight:600}.down{color:var(--bad);font-weight:600}.flat{color:var(--muted)}
.icon{display:inline-block;width:18px;text-align:center;font-weight:700}
.i-passed{color:var(--ok)}.i-failed{color:var(--bad)}.i-inconclusive{color:var(--warn)}.i-skipped{color:var(--muted)}
details.scenario{background:var(--card);border:1px solid var(--line);border-radius:8px;margin-bottom:10px}
details.scenario>summary{cursor:pointer;padding:10px 14px;display:flex;gap:10px;align-items:center;list-style:none}
details.scenario>summary::-webkit-details-marker{display:none}
details.scenario>summary .name{font-weight:600;flex:1}
details.scenario>summary .facts{color:var(--muted);font-size:12px}
details.scenario[open]>summary{border-bottom:1px solid var(--line)}
details.scenario.group>.sbody>details.scenario{margin:0 0 8px}
.sbody{padding:12px 16px}
.failure{background:#fff5f5;border-left:3px solid var(--bad);padding:8px 12px;border-radius:4px;margin-bottom:12px;\
white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.turn{border-left:2px solid var(--line);margin:0 0 12px 6px;padding-left:14px}
.turn .tn{font-size:12px;color:var(--muted);margin-bottom:4px}
.msg{padding:8px 12px;border-radius:8px;margin:4px 0;white-space:pre-wrap;max-width:92%}
.user{background:#e7f5ff}.agent{background:#f1f3f5}
.msg .who{display:block;font-size:11px;font-weight:700;color:var(--muted);text-transform:uppercase;margin-bottom:2px}
.tool::before{content:"tool call";display:block;font-size:10px;font-weight:700;color:var(--muted);\
text-transform:uppercase;font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
.tool{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;background:#fff;border:1px dashed #ced4da;\
border-radius:6px;padding:6px 10px;margin:4px 0;white-space:pre-wrap;word-break:break-word}
.topic{display:inline-block;background:#f3f0ff;color:#6741d9;border-radius:10px;padding:0 8px;font-size:11px;\
font-weight:600;margin-left:6px}
.path .topic{margin:0 2px}
.muted{color:var(--muted)}
ul.plain{margin:4px 0;padding-left:18px}
footer{color:var(--muted);font-size:12px;margin-top:40px;text-align:center}
a{color:var(--info);text-decoration:none}
main p a,main li a,header a{text-decoration:underline;text-underline-offset:2px}
"""
