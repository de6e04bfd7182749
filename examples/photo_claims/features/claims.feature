Feature: Photo claims
  A customer sends a photo of what broke; the agent reads it and sends a claim form back.

  Scenario: A photo of the damaged lamp
    When the user sends "files/lamp.png" with "My lamp broke. Is this covered?"
    Then the response must match "64x48"
    And the response must match "mostly red"
    And the agent must reply with a file matching "claim-*.txt"
    And the agent's file "claim-*.txt" must contain "Item: lamp"

  Scenario: No photo yet
    When the user says "My lamp broke. Is this covered?"
    Then the response must match "(?i)send a photo"
    And the agent must not reply with a file
