"""The projects under ``projects/`` are run by the tests here, never collected by this suite."""

collect_ignore = ["projects"]
