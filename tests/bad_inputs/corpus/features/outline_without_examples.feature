Feature: Outline without examples
  Scenario Outline: Greeting <name>
    When the user says "hi <name>"
    Then the response must match "hello"
