@grounding
Feature: Replies are grounded in tool results
  The judge checks the reply's factual claims against what the tools returned.
  Without GEMINI_API_KEY the demo's offline stand-in ([tool.fabtest] offline_llm) judges instead.

  Scenario: Prices come from the catalogue
    Given the agent "venue_bot"
    When the user says "A room in Berlin for 10 people on 12 March"
    Then the agent must call "search_venues"
    And the response must be grounded in "search_venues"
    And the response should have the intent "present matching venues"

  @soft_failures
  Scenario: An invented price is caught (soft)
    Given the agent "inventive_bot"
    When the user says "A room in Berlin for 10 people on 12 March"
    Then the agent must call "search_venues"
    And the response should be grounded in "search_venues"
