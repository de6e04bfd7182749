"""Self-contained HTML reports of one experiment and of a comparison (:mod:`fabtest.report.html`),
and the console summary (:mod:`fabtest.report.console`).

Nothing is imported here: every run prints the console summary, and importing this package used to
import the HTML report with it (the comparison modules and pygments behind it), about 0.3 s of a
quiet process and over a second at the end of a run of 1,000 conversations at once.
"""
