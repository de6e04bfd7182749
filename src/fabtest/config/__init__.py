"""What a project configures: ``[tool.fabtest]`` settings, scenario sets and criteria."""
