@mcp
Feature: A built-in agent with the venue tools behind an MCP server
  "venue_mcp" exists only in pyproject.toml ([tool.fabtest.agents.venue_mcp]): a Gemini model,
  instructions, and the demo venue tools served by `python -m fabtest.demo.mcp_server` over stdio.
  fabtest runs the tool loop, records every MCP call with its arguments and result, and stops the
  server when the run ends (it is marked shared). Without GEMINI_API_KEY the demo's offline script
  ([tool.fabtest] offline_llm) plays the model too, so the same tool loop runs with no key.

  Background:
    Given the agent "venue_mcp"

  Scenario: Searching through the MCP server
    When the user says "A room in Berlin for 10 people on 12 March"
    Then the agent must call "search_venues" with:
      | argument | value  |
      | city     | Berlin |
      | capacity | >= 10  |
    And the response must match "Spreeblick Loft"
    And the response should be grounded in "search_venues"

  Scenario: The conversation and its tool results carry over to the next turn
    When the user says "A room in Munich for 10 people on 3 May"
    And the user says "Is Isar Studio free then?"
    Then the agent must call "check_availability" with:
      | argument | value    |
      | venue_id | muc-isar |
      | date     | 3 May    |
    And the response must match "not available"
    And the conversation must include a call to "search_venues"
