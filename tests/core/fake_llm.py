"""A scripted LLM for tests: records every call and answers from a queue or a function.

An answer may be a pydantic model, a dict (validated against the requested schema, like a real
provider would), a string (free text for ``complete``; JSON for ``complete_json``) or an exception
instance, which is raised.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from fabtest.conversation import TokenUsage
from fabtest.llm.base import Completion, LLMBadOutput


@dataclass
class Call:
    method: str  # "complete" or "complete_json"
    prompt: str
    system: str | None
    schema: type[BaseModel] | None
    temperature: float | None


Answer = BaseModel | dict[str, Any] | str | BaseException


class FakeLLM:
    provider = "fake"
    model = "fake-1"

    def __init__(
        self,
        answers: list[Answer] | None = None,
        *,
        respond: Callable[[Call], Answer] | None = None,
        input_tokens: int = 10,
        output_tokens: int = 5,
    ) -> None:
        self.answers: list[Answer] = list(answers or [])
        self.respond = respond
        self.calls: list[Call] = []
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens

    @property
    def prompts(self) -> list[str]:
        return [call.prompt for call in self.calls]

    def complete(self, prompt: str, *, system: str | None = None, temperature: float | None = None) -> Completion[Any]:
        answer = self._next(Call("complete", prompt, system, None, temperature))
        text = answer.model_dump_json() if isinstance(answer, BaseModel) else answer
        text = json.dumps(text) if isinstance(text, dict) else text
        return Completion(text=str(text), usage=self._usage(), model=self.model)

    def complete_json(
        self, prompt: str, schema: type[Any], *, system: str | None = None, temperature: float | None = None
    ) -> Completion[Any]:
        answer = self._next(Call("complete_json", prompt, system, schema, temperature))
        try:
            if isinstance(answer, BaseModel):
                parsed = schema.model_validate(answer.model_dump())
            elif isinstance(answer, dict):
                parsed = schema.model_validate(answer)
            else:
                parsed = schema.model_validate_json(answer)
        except ValidationError as exc:
            raise LLMBadOutput(f"fake answer does not fit {schema.__name__}: {exc}") from None
        return Completion(text=parsed.model_dump_json(), parsed=parsed, usage=self._usage(), model=self.model)

    def _next(self, call: Call) -> Answer:
        self.calls.append(call)
        if self.respond is not None:
            answer = self.respond(call)
        elif self.answers:
            answer = self.answers.pop(0)
        else:
            raise AssertionError(f"FakeLLM has no answer left for call {len(self.calls)}:\n{call.prompt[:500]}")
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _usage(self) -> TokenUsage:
        return TokenUsage(calls=1, input_tokens=self.input_tokens, output_tokens=self.output_tokens)
