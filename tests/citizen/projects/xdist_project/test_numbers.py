"""An Outline run under pytest-xdist."""

from pytest_bdd import given, parsers, scenarios, then

scenarios("numbers.feature")


@given(parsers.parse("the number {n:d}"), target_fixture="n")
def number(n):
    return n


@then(parsers.parse("its square is {square:d}"))
def square(n, square):
    assert n * n == square
