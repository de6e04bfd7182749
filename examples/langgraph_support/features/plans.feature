Feature: Plan changes are verified, and survive a broken tool

  Background:
    Given the agent "support"

  Scenario: The account is verified before the plan changes
    When the user says "Switch me to unlimited, my number is 0176 555 0101"
    Then the agent must call the tools in order:
      | tool           |
      | lookup_account |
      | change_plan    |
    And the agent must call "lookup_account" before "change_plan"
    And the conversation must call "change_plan" at most 1 time
    And the agent must only call tools from: "lookup_account, list_plans, change_plan"
    And the response must match "account A-17 is now on unlimited"
    And the state "account.plan" must be "unlimited"

  Scenario: The plans API is down
    Given the tool "list_plans" fails with "503 Service Unavailable"
    When the user says "Switch me to unlimited, my number is 0176 555 0101"
    Then the agent must not call "change_plan"
    And the response must match "(?i)try again later"

  Scenario: Another caller, another account
    Given the tool "lookup_account" returns:
      | phone  | result                                     |
      | /^030/ | {"account_id": "B-2", "plan": "unlimited"} |
    When the user says "Move me to basic, my number is 030 1234567"
    Then the state must include:
      | path         | value |
      | account.id   | B-2   |
      | account.plan | basic |

  Scenario: Deep in the conversation
    Given the conversation so far:
      | role  | message                          |
      | user  | I want the unlimited plan        |
      | agent | Sure, what is your phone number? |
    When the user says "0176 555 0101"
    And the response mentions "account (A-\d+)" as "account"
    Then the agent must call "change_plan" with:
      | argument | value     |
      | plan     | unlimited |
    And the state "account.id" must be "{account}"
