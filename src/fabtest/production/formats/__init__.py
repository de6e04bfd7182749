"""One module per log format (:mod:`.base` says what a format is; :mod:`fabtest.production.logs` lists them)."""
