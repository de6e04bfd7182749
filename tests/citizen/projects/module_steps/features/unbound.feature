Feature: Written but not bound by any test module
  Scenario: Never collected by pytest-bdd
    Given an empty cart
