@smoke
Feature: Shopping cart
  Background:
    Given an empty cart

  Scenario: Add one item
    When I add 1 "apple"
    Then the cart holds 1 item

  Scenario: A wrong expectation fails
    When I add 2 "pear"
    Then the cart holds 3 item

  Scenario Outline: Add several items
    When I add <count> "<fruit>"
    Then the cart holds <count> item

    Examples:
      | count | fruit  |
      | 2     | banana |
      | 5     | kiwi   |

  Scenario: The user says hello
    When the user says "hi"
    Then the response must contain "hi"
