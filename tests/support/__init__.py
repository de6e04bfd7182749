"""Helpers shared by test modules (no test module imports another): import as ``support.<module>``
(``tests/`` is on ``sys.path``: pytest inserts the directory of the rootdir ``tests/conftest.py``)."""
