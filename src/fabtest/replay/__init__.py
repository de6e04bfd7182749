"""Replay of recorded conversations against today's agent, branching at the first real difference."""
