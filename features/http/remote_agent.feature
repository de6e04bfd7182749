@http
Feature: The venue bot behind an HTTP endpoint
  The same agent, served by `python -m fabtest.demo.server`, through the HTTP adapter.

  Scenario: Searching over HTTP
    When the user says "A room in Hamburg for 20 people on 1 June"
    Then the agent must call "search_venues" with:
      | argument | value   |
      | city     | Hamburg |
    And the response must match "Hafenblick Rooms"

  Scenario: Booking over HTTP keeps the conversation state
    When the user says "Stuttgart, 40 people, 9 October"
    And the user says "Neckar Forum"
    And the user says "go ahead"
    Then the agent must call "book_venue" with:
      | argument | value        |
      | people   | 40           |
      | date     | 9 October    |
    And the conversation must include a call to "check_availability"
