Feature: Regexes

  Scenario: Nothing to repeat
    When the user says "hi"
    Then the response must match "*hello"
