"""fabtest's pytest plugin: collection of features and playbooks, the step vocabulary, experiments."""
