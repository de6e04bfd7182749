"""Steps defined in the test module itself, bound with scenarios()."""

from pytest_bdd import given, parsers, scenarios, then, when

scenarios("features/cart.feature")


@given("an empty cart", target_fixture="cart")
def empty_cart():
    return []


@when(parsers.parse('I add {count:d} "{fruit}"'))
def add(cart, count, fruit):
    cart.extend([fruit] * count)


@then(parsers.parse("the cart holds {count:d} item"))
def holds(cart, count):
    assert len(cart) == count


# Step texts that fabtest's own vocabulary also knows: the project's meaning must win.
@when(parsers.parse('the user says "{text}"'), target_fixture="said")
def says(text):
    return text


@then(parsers.parse('the response must contain "{text}"'))
def response_contains(said, text):
    print("project step ran")
    assert text in said


def test_plain_function():
    assert True
