"""Project-level steps for the example features (see step_defs/)."""

pytest_plugins = ["step_defs.venue_steps"]
