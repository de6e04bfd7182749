"""Questioning the judge: re-judging recorded transcripts and calibrating against human labels.

See docs/how-to/flaky.md.
"""
