"""The Gemini the shop talks to without a key: fabtest's FakeGemini, scripted.

It asks for get_price when the user names an item, and answers from the function response once
it came back; every answer carries token usage, priced as gemini-2.5-flash.
"""

from fabtest.testing import FakeGemini

ITEMS = ("green tea", "black tea")


def scripted_gemini() -> FakeGemini:
    fake = FakeGemini()
    for item in ITEMS:
        fake.add_tool_script(item, [
            {"name": "get_price", "args": {"item": item}},
            lambda req: "The {item} costs {price:.2f} {currency}.".format(**req.function_responses[-1]["response"]),
        ])
    fake.add_rule(r".", text=f"Which tea would you like a price for? We sell {' and '.join(ITEMS)}.")
    return fake
