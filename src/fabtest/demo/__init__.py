"""The example venue-booking agent used by ``features/`` (in-process, HTTP and CLI)."""

from fabtest.demo.agent import (
    CATALOGUE,
    VenueAgent,
    build_agent,
    build_grumpy_agent,
    build_inventive_agent,
)

__all__ = ["CATALOGUE", "VenueAgent", "build_agent", "build_grumpy_agent", "build_inventive_agent"]
