Feature: Topics

  Scenario: Unknown successor
    Given the topics:
      | topic    | characteristic   | triggers | next      |
      | greeting | The agent greets |          | farewelll |
      | farewell | The agent leaves |          |           |
    When the user says "hi"
