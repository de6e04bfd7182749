Feature: Numbers
  Scenario Outline: Square
    Given the number <n>
    Then its square is <square>

    Examples:
      | n | square |
      | 1 | 1      |
      | 2 | 4      |
      | 3 | 10     |
      | 4 | 16     |
