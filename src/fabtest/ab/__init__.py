"""``fabtest ab``: run two arms (git refs or configurations) of one suite and decide between them.

:mod:`fabtest.ab.arms` checks each arm out (``git worktree``) and builds its environment,
:mod:`fabtest.ab.rounds` is the loop that buys iterations on both arms until the decision of
:mod:`fabtest.compare.paired` is made or the budget is spent, :mod:`fabtest.ab.session` runs the
arms' pytest processes and merges their parts into one experiment per arm.
"""
