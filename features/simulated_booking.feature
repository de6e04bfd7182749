@simulated
Feature: Simulated users book venues
  A simulator LLM plays the user from a goal and a persona; the judge LLM scores every reply.
  Without GEMINI_API_KEY the demo's offline stand-in ([tool.fabtest] offline_llm) plays the user and the judge.

  Background:
    Given the agent "venue_bot"
    And the criterion "friendly" means "The agent is warm and polite"
    And the criterion "concise" means "The reply has at most three sentences" with examples:
      | example                                                        | verdict |
      | I found 2 venues in Berlin. Which one would you like?          | good    |
      | Sure. Let me check. I looked. There are venues. Pick one. Ok?  | bad     |
    And the topics:
      | topic              | characteristic                            | triggers                         | next               |
      | greeting           | The agent greets and asks what is needed |                                  | gathering_details  |
      | gathering_details  | The agent asks for date, size and city   | agent:/(?i)which city\|how many/ | presenting_results |
      | presenting_results | The agent presents matching venues       | tool:search_venues               | booking            |
      | booking            | The agent books the chosen venue         | tool:book_venue                  |                    |
    And the persona "A busy office manager who answers briefly"
    And the simulated user should "answer in one or two sentences"
    And the simulation takes at most 8 turns
    And the simulation stops when the agent calls "book_venue"

  Scenario: An office manager books a room in Berlin
    Given a simulated user with the goal "Book a room for 10 people in Berlin on 12 March"
    When the simulated user talks to the agent
    Then the conversation must include a call to "book_venue"
    And the conversation must reach the topic "booking"
    And the conversation should follow the topics "gathering_details, presenting_results, booking"
    And every response should satisfy "friendly"
    And every response should satisfy "concise"
    And the conversation should satisfy "The agent never asks the same question twice"
    And the goal must be achieved

  Scenario: A team lead books in Munich after an unavailable first choice
    Given a simulated user with the goal "Book a venue in Munich for 12 people on 3 May"
    And the simulated user knows:
      | fact      | value |
      | team size | 12    |
    When the simulated user talks to the agent
    Then the conversation must include a call to "check_availability"
    And the conversation must reach the topic "booking"
    And the response should have the intent "confirm the booking"
    And the goal should be achieved

  Rule: The grumpy bot completes bookings but is not friendly
    Background:
      Given the agent "grumpy_bot"

    @soft_failures
    Scenario: A grumpy booking still completes
      Given a simulated user with the goal "Book a room for 20 people in Hamburg on 1 June"
      When the simulated user talks to the agent
      Then the conversation must include a call to "book_venue"
      And every response should satisfy "friendly"
