Feature: The tea shop quotes prices from its catalogue

  Background:
    Given the agent "shop"

  Scenario: A price comes from the get_price tool
    When the user says "How much is the green tea?"
    Then the agent must call "get_price" with:
      | argument | value     |
      | item     | green tea |
    And the response must be grounded in "get_price"
    And the response must match "4\.50 EUR"

  Scenario: Without an item it asks which one
    When the user says "What do you sell?"
    Then the agent must not call "get_price"
    And the response must match "green tea"
