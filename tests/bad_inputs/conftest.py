# The corpus holds deliberately broken .feature files: never collect them as part of the suite.
collect_ignore_glob = ["corpus/*"]
