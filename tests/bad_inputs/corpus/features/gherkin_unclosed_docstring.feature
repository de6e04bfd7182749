Feature: Broken syntax

  Scenario: Never parsed
    When the user says "hi"
      """
      an unclosed docstring
