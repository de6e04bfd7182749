Feature: Booking by phone
  A caller speaks to the receptionist; fabtest speaks the caller's words, hears the reply.

  Scenario: Booking a table
    When the user says "book a table for two tonight"
    Then the agent must start speaking within 3000 ms
    And the response must match "(?i)table"

  Scenario: The caller cuts in
    When the user says "what is on the menu tonight"
    And the user interrupts after 1000 ms with "just book a table please"
    Then the response must match "(?i)table"
