Feature: Topics

  Scenario: Unreachable topic
    Given the topics:
      | topic    | characteristic   | triggers | next     |
      | greeting | The agent greets |          | farewell |
      | farewell | The agent leaves |          |          |
      | orphan   | Nobody gets here |          |          |
    When the user says "hi"
