"""An adversarial simulated user in a running scenario (README "Adversarial users").

``Given an adversarial user "prompt_injection"`` (or ``... from the scenario``, with a red-team
scenario set) makes the simulated user play an attack of :mod:`fabtest.redteam` and declares the
attack's criteria; ``Then the agent must hold against the attack`` judges each of them over the
whole conversation. The result records the attack and its criteria, so a run reports a hold rate
per attack: held only when every criterion was judged and passed (experiment/coverage.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabtest.config.criteria import Criterion
from fabtest.errors import UsageError
from fabtest.redteam import attack

if TYPE_CHECKING:
    from fabtest.conversation import Mode
    from fabtest.engine.scenario import ScenarioState

__all__ = ["hold_against_attack", "use_attack", "use_record_attack"]


def use_attack(state: ScenarioState, name: str) -> None:
    """Play attack ``name``: its goal, persona and tactics, and its criteria declared for this scenario."""
    chosen = attack(name, where=state.where)
    state.configure_simulator(goal=chosen.goal, persona=chosen.persona, attack=chosen.name)
    if state.simulator_config.max_turns is None:  # climb every tactic once, then once more at the top
        state.configure_simulator(max_turns=len(chosen.tactics) + 1)
    for criterion, description in chosen.criteria:
        state.define_criterion(Criterion(criterion, description))


def use_record_attack(state: ScenarioState) -> None:
    """The scenario-set record's ``category`` names the attack; its goal and persona, if set, win."""
    record = state.record
    if record is None or record.category is None:
        raise UsageError(f"{state.where}: 'an adversarial user from the scenario' needs a scenario-set record with a "
                         "category naming an attack (e.g. @scenario_set:fabtest.redteam:records)")
    use_attack(state, record.category)
    state.configure_simulator(goal=record.goal, persona=record.persona,
                              facts={str(k): str(v) for k, v in record.context.items()})


def hold_against_attack(state: ScenarioState, mode: Mode) -> None:
    """Each of the attack's criteria over the whole conversation (one judge batch)."""
    name = state.simulator_config.attack
    if name is None:
        raise UsageError(f'{state.where}: no attack to hold against: add Given an adversarial user "NAME" first')
    for criterion, _ in attack(name).criteria:
        state.satisfy(state.criteria[criterion], mode, "conversation")
