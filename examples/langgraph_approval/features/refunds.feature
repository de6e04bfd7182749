Feature: Refunds wait for a person's approval

  Background:
    Given the agent "desk"

  Scenario: An approved refund is made
    When the user says "Please refund order A1"
    Then the agent must ask for approval of "refund" with:
      | argument | value |
      | order    | A1    |
      | amount   | <= 50 |
    And the agent must not call "refund"
    When the user approves
    Then the agent must call "refund"
    And the response must match "Refunded 30.00 EUR"

  Scenario: A rejected refund is not made
    When the user says "Please refund order A1"
    And the user rejects with "no receipt"
    Then the agent must not call "refund"
    And the response must match "did not refund the order: no receipt"

  Scenario: The person lowers the amount
    When the user says "Please refund order B2"
    And the user approves with:
      | argument | value |
      | amount   | 50    |
    Then the agent must call "refund" with:
      | argument | value |
      | amount   | 50    |

  Scenario: A question is not an approval
    When the user says "Can I get my money back?"
    Then the agent must not ask for approval
