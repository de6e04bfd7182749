@topics
Feature: Following the conversation through topics
  Triggers classify scripted turns without any LLM.

  Background:
    Given the agent "venue_bot"
    And the topics:
      | topic              | characteristic                            | triggers                  | next               |
      | greeting           | The agent greets and asks what is needed |                           | gathering_details  |
      | gathering_details  | The agent asks for date, size and city   | agent:/(?i)which city\|how many/ | presenting_results |
      | presenting_results | The agent presents matching venues       | tool:search_venues        | booking            |
      | booking            | The agent books the chosen venue         | tool:book_venue           |                    |

  Scenario: A booking walks the whole graph
    When the user says "Hello!"
    And the user says "Berlin, 12 March, 10 people"
    And the user says "Spreeblick Loft"
    And the user says "yes, book it"
    Then the conversation must follow the topics "gathering_details, presenting_results, booking"
    And the conversation must reach the topic "booking"
    And the conversation must take at most 4 turns

  Scenario: Browsing without booking never reaches booking
    When the user says "Hi there"
    And the user says "Munich on 3 May for 20 people"
    Then the conversation must reach the topic "presenting_results"
    And the conversation should reach the topic "booking"
    And the conversation must not include a call to "book_venue"
