"""A value taken from the agent's reply by the judge: ``When the response mentions a booking
reference as "ref"``.

A regex finds a value whose shape is known (``B-\\d+``); a description (``a booking reference``,
``the total price``) needs reading. The judge is shown what to find, then the reply, and copies
the value exactly as written or says it is not there, the extraction pattern of structured-output
graders (OpenAI Evals' and promptfoo's extract-then-compare): copying, not paraphrasing, keeps the
value usable in a later step (``{ref}``).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from fabtest.conversation import TokenUsage
from fabtest.llm.base import LLM
from fabtest.llm.calls import LLMCall, llm_call

__all__ = ["EXTRACT_PROMPT", "EXTRACT_SYSTEM_PROMPT", "Extracted", "extract"]

EXTRACT_SYSTEM_PROMPT = """\
You read an AI agent's reply and copy one value out of it, exactly as it is written there. \
Answer with a single JSON object and nothing else."""

EXTRACT_PROMPT = """\
WHAT TO FIND
{what}

THE AGENT'S REPLY
{reply}

If the reply mentions it, set "found" to true and copy it into "value" exactly as written (no \
quotes, no words around it). If it does not, set "found" to false and "value" to "".
JSON: {{"found": true, "value": "..."}}"""


class Extracted(BaseModel):
    """The judge's answer."""

    found: bool
    value: str = ""


def extract(llm: LLM, what: str, reply: str, *, charge: Callable[[TokenUsage], None]) -> Extracted:
    """Ask ``llm`` for ``what`` in ``reply``; an answer that does not parse is "not found"."""
    call = LLMCall("extract", subject=reply, intent=what, response=reply)
    with llm_call(call):
        completion = llm.complete_json(EXTRACT_PROMPT.format(what=what, reply=reply), Extracted,
                                       system=EXTRACT_SYSTEM_PROMPT)
    charge(completion.usage)
    found = completion.parsed
    if found is None or (found.found and not found.value.strip()):
        return Extracted(found=False)
    return Extracted(found=found.found, value=found.value.strip())
