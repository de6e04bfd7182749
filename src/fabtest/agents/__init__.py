"""Agent adapters: Python objects and callables, HTTP endpoints, CLIs run per turn, ACP agents.

Internal: a project imports the agent protocol from :mod:`fabtest` (docs/reference/api.md); this
package offers no face of its own, so importing it loads no adapter (httpx, asyncio, an SDK).
"""
