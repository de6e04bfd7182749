Feature: Misspelled criterion
  Background:
    Given the criterion "friendly" means "The agent is warm"

  Scenario: Typo
    When the user says "hi"
    Then the response should satisfy "frendly"
