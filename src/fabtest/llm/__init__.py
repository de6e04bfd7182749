"""LLM providers for the judge and the simulator.

Internal: each module is imported where it is needed (``fabtest.llm.base`` for the protocol,
``fabtest.llm.factory`` to build one); the package offers no face of its own, so ``pytest
--collect-only`` never pays for a provider's client.
"""
