"""A project-specific step: how to extend fabtest's vocabulary with your own checks.

A step is an ordinary pytest-bdd step. Ask for the ``fabtest_scenario`` fixture (a
``fabtest.Scenario``) to reach the conversation, and record the outcome with ``record_check`` so it is soft (``should``) or hard
(``must``) like every built-in step and shows up in the experiment's criteria table.
"""

from __future__ import annotations

from pytest_bdd import parsers, then

import fabtest
from fabtest.demo.agent import CATALOGUE


@then(parsers.re(r'the agent (?P<mode>should|must) quote the catalogue price of "(?P<venue>[^"]+)"'))
def quote_catalogue_price(fabtest_scenario: fabtest.Scenario, mode: str, venue: str) -> None:
    turn = fabtest_scenario.last_turn
    price = next((v["price_per_day"] for v in CATALOGUE if v["name"] == venue), None)
    quoted = price is not None and f"€{price}" in turn.response.text
    fabtest_scenario.record_check(
        "catalogue_price", mode, f"price:{venue}", "passed" if quoted else "failed",
        f"expected €{price} for {venue} in the reply" if price else f"{venue} is not in the catalogue",
        turn=turn.number,
    )
