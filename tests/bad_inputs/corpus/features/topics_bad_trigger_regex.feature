Feature: Topics

  Scenario: Bad trigger regex
    Given the topics:
      | topic    | characteristic   | triggers        | next     |
      | greeting | The agent greets | agent:/(hello/  | farewell |
      | farewell | The agent leaves |                 |          |
    When the user says "hi"
