@scenario_set
Feature: Venue booking scenario set
  One scenario, run once per record of scenarios/venues.yaml.

  Background:
    Given the agent "venue_bot"
    And the topics:
      | topic              | characteristic                            | triggers                         | next               |
      | greeting           | The agent greets and asks what is needed |                                  | gathering_details  |
      | gathering_details  | The agent asks for date, size and city   | agent:/(?i)which city\|how many/ | presenting_results |
      | presenting_results | The agent presents matching venues       | tool:search_venues               | booking            |
      | booking            | The agent books the chosen venue         | tool:book_venue                  |                    |
    And the simulation stops when the agent calls "book_venue"

  @scenario_set:venues
  Scenario: A customer books the venue they need
    Given a simulated user from the scenario
    When the simulated user talks to the agent
    Then every response should satisfy "The agent is warm and polite"
