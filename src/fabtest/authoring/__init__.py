"""Writing scenarios from what a run left behind: drafts aimed at what was never exercised."""
