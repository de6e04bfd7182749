"""Questioning the judge: re-judging recorded transcripts and calibrating against human labels.

See README "Why did this scenario flake?".
"""
