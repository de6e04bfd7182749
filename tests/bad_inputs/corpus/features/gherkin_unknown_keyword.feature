Feature: Broken syntax

  Scenario: Never parsed
    When the user says "hi"
    Whereupon the agent answers
