Feature: With tables

  Scenario: Three columns
    When the user says "hi"
    Then the agent must call "search_venues" with:
      | argument | value  | note  |
      | city     | Berlin | extra |
