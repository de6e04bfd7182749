Feature: Regexes

  Scenario: Unbalanced bracket
    When the user says "hi"
    Then the response should not match "[a-"
