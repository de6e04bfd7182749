"""Experiments: the record of a run and its numbers.

``experiment/recorder.py`` collects ``ScenarioResult``s and writes ``results/<id>.json``
(``export.py``); ``reader.py`` reads one back. What reads an experiment sits above this package:
:mod:`fabtest.report.console` prints it, :mod:`fabtest.compare` diffs two. Internal: the package
offers no face of its own; import from the module that holds the name.
"""
