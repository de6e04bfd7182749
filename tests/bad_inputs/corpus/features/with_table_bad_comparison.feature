Feature: With tables

  Scenario: Comparison that is not a number
    When the user says "hi"
    Then the agent should call "search_venues" with:
      | argument | value    |
      | size     | >= ten   |
