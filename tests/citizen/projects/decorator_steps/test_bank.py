"""Scenarios bound one by one with @scenario, steps from the conftest."""

import pytest
from pytest_bdd import scenario


@scenario("bank.feature", "Withdraw within the balance")
def test_withdraw(fabtest_agent):
    assert fabtest_agent == "the project's agent"


@scenario("bank.feature", "Withdraw too much")
def test_withdraw_too_much():
    pass


@pytest.mark.xfail(reason="deposits are not written yet", strict=True)
@scenario("bank.feature", "Has no step definition")
def test_deposit():
    pass
