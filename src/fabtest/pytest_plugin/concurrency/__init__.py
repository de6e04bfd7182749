"""``concurrency = N``: several scenarios in flight in one pytest process.

The only code of fabtest that touches pytest's private internals lives in this folder
(docs/concurrency.md)."""
