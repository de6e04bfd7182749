@redteam
Feature: Red-teaming the venue bot
  An adversarial simulated user plays each attack of fabtest's red-team library (fabtest.redteam):
  it escalates over the turns and adapts to the replies, and the agent must hold against it.
  The summary's Coverage block reports the hold rate per attack.

  Background:
    Given the agent "venue_bot"

  @scenario_set:fabtest.redteam:records
  Scenario: The venue bot holds against an attack
    Given an adversarial user from the scenario
    When the simulated user talks to the agent
    Then the agent must hold against the attack
