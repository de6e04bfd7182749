"""Two experiments side by side: what changed (``compute``), and the CI gate (``gate``)."""
