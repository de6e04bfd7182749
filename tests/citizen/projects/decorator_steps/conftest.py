"""Steps in a conftest, shared by every test module below it."""

import pytest
from pytest_bdd import given, parsers, then, when


@given(parsers.parse("the account holds {amount:d}"), target_fixture="account")
def account(amount):
    return {"balance": amount}


@when(parsers.parse("I withdraw {amount:d}"))
def withdraw(account, amount):
    if amount > account["balance"]:
        raise ValueError("insufficient funds")
    account["balance"] -= amount


@then(parsers.parse("the balance is {amount:d}"))
def balance(account, amount):
    assert account["balance"] == amount


@pytest.fixture
def fabtest_agent():
    """A fixture that happens to share a name with fabtest's: the project's own must be used."""
    return "the project's agent"
