Feature: Topics

  Scenario: Self loop
    Given the topics:
      | topic    | characteristic   | triggers | next               |
      | greeting | The agent greets |          | greeting, farewell |
      | farewell | The agent leaves |          |                    |
    When the user says "hi"
