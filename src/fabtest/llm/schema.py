"""Answer schemas whose fields the model writes in the order they are declared.

A model writes a JSON answer left to right: a ``verdict`` decoded before its ``reasoning`` is a
decision the reasoning can only rationalise. G-Eval (chain of thought before the score), Inspect
AI's ``model_graded_qa`` (reasoning, then ``GRADE:``) and DeepEval's judges (``reason`` before
``score`` in their schemas) all reason first. Gemini's structured output emits the ``required``
properties first, in the order ``required`` lists them, and OpenAI's strict mode wants every
property required; so :data:`ORDERED` lists every property in ``required`` in declaration order,
and a schema declares what the model reasons or plans in before what it decides. Defaults still
apply when pydantic validates (an old cached answer without a field stays usable).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

__all__ = ["ORDERED", "all_required_in_order"]


def all_required_in_order(schema: dict[str, Any]) -> None:
    """``json_schema_extra`` hook: every property required, in the order the model declares them."""
    properties = schema.get("properties")
    if isinstance(properties, dict):
        schema["required"] = list(properties)
        for field in properties.values():  # a required field has no default to announce (strict modes refuse one)
            if isinstance(field, dict):
                field.pop("default", None)


#: ``model_config`` of an answer schema written in declaration order (reasoning before verdict)
ORDERED = ConfigDict(json_schema_extra=all_required_in_order)
