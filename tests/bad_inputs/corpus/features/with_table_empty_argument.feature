Feature: With tables

  Scenario: Empty argument name
    When the user says "hi"
    Then the agent must call "search_venues" with:
      | argument | value  |
      |          | Berlin |
