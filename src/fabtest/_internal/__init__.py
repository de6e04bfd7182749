"""Plumbing fabtest's parts share; nothing here is public API."""
