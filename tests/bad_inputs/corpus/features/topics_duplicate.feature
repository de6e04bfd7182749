Feature: Topics

  Scenario: Duplicate topic
    Given the topics:
      | topic    | characteristic   | triggers | next     |
      | greeting | The agent greets |          | farewell |
      | farewell | The agent leaves |          |          |
      | greeting | Said twice       |          |          |
    When the user says "hi"
