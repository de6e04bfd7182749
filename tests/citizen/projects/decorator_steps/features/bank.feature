Feature: Bank account
  Rule: Withdrawals
    @wip
    Scenario: Withdraw within the balance
      Given the account holds 100
      When I withdraw 30
      Then the balance is 70

    Scenario: Withdraw too much
      Given the account holds 10
      When I withdraw 30
      Then the balance is 10

  Rule: Deposits
    Scenario: Has no step definition
      Given the account holds 10
      When I deposit 5
      Then the balance is 15
