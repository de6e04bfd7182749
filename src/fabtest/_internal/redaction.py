"""One way to keep secrets out of everything fabtest writes: results, traces, logs, messages, caches.

A secret is any value fabtest substituted from the environment: ``${VAR}`` in an agent table of
``[tool.fabtest]`` (an HTTP agent's ``?token=${BOT_TOKEN}``; not a port-sized number of a variable
whose name does not say secret, see :func:`register_env`) and the variables a playbook lists in
``env``. Where a value is substituted it is :func:`register`-ed in this process; every writer
then passes its text through :func:`redact` / :func:`redact_obj`, which replace each secret (and
its JSON-escaped, repr, URL-encoded, HTML-escaped and base64 forms, one and two deep) with ``***``. The LLM
keys fabtest itself reads (``GEMINI_API_KEY``, ``GOOGLE_API_KEY``, ``OPENAI_API_KEY``, a builtin agent's
``api_key_env``) are secrets too (:func:`register_llm_keys`): an agent that echoes one leaks it as surely as a
``${VAR}``. Values shorter than
:data:`MIN_SECRET_LENGTH` are not registered: hiding every "1" or "on" would shred the results
and hide nothing.

The registry is per process (pytest-xdist workers register what they substitute themselves);
the pytest plugin clears it when a session starts and ends.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["LLM_KEY_ENV_VARS", "MIN_SECRET_LENGTH", "PERSONAL_DATA", "REDACTED", "PersonalData", "Redactor", "clear",
           "redact", "redact_obj", "register", "register_configured_secrets", "register_env", "register_llm_keys",
           "register_project_secrets", "register_url_credentials",
           "secrets"]

REDACTED = "***"
MIN_SECRET_LENGTH = 4
_LOGGERS = ("fabtest", "fabtest.conversation")


def _encodings(text: str) -> set[str]:
    """``text`` as each writer may spell it inside a larger text: JSON-escaped (with and without
    ``\\u`` escapes, with ``/`` escaped as some encoders do), a Python repr (failure messages quote
    the agent's reply so), URL-encoded (httpx) and HTML-escaped (the reports)."""
    json_forms = {json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]}
    unquoted = repr(text)[1:-1].replace("\\'", "'")  # repr escapes ' or not, as its quote needs
    return {*json_forms, *(f.replace("/", "\\/") for f in json_forms), unquoted, unquoted.replace("'", "\\'"),
            *_url_forms(text), html.escape(text), html.escape(text, quote=False)}


def _url_forms(text: str) -> set[str]:
    """``text`` URL-encoded as httpx and urllib spell it. A lone surrogate (an environment value that
    was not UTF-8 reaches Python as ``\\udcXX``) cannot be UTF-8: its bytes as the environment held
    them (surrogateescape) and as surrogatepass writes them are both covered instead of raising."""
    forms: set[str] = set()
    for errors in ("strict", "surrogateescape", "surrogatepass"):
        try:
            forms |= {quote(text, safe="", errors=errors), quote(text, errors=errors),
                      quote_plus(text, safe="", errors=errors), quote_plus(text, errors=errors)}
        except UnicodeEncodeError:
            continue
        if errors == "strict":
            break
    return forms


#: The shortest base64 run of a secret's bytes that is redacted inside a longer base64 text (6 bytes): a
#: shorter run would match unrelated base64 by chance.
_MIN_BASE64_CORE = 8


def _base64_forms(text: str) -> set[str]:
    """``text`` base64-encoded (standard and URL-safe alphabets, padded or not), alone and inside a longer
    base64 text: an HTTP ``Authorization: Basic`` header that httpx builds from ``user:${PASS}@`` in a URL
    encodes ``user:pass``, where the password starts at any of 3 byte offsets. For each offset the run of
    base64 characters that encodes only the secret's bytes is a form; the 1 or 2 characters at each end
    that mix in the neighbours' bits stay (they carry at most 2 bytes of the secret at each end)."""
    raw = text.encode("utf-8", "surrogatepass")
    forms: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        alone = encode(raw).decode("ascii")
        if len(alone) >= _MIN_BASE64_CORE:
            forms |= {alone, alone.rstrip("=")}
        for shift in range(3):
            body = raw[shift:]
            core = encode(body[: len(body) - len(body) % 3]).decode("ascii")
            if len(core) >= _MIN_BASE64_CORE:
                forms.add(core)
    return forms


def _forms(secret: str) -> set[str]:
    """The secret as written and in every encoding of :func:`_encodings` and :func:`_base64_forms`, one
    and two deep (a reply that is JSON, quoted in a failure message that is written into a JSON file)."""
    once = _encodings(secret) | _base64_forms(secret)
    return {secret, *once, *(twice for form in once for twice in _encodings(form))}


class Redactor:
    """Replaces every secret value with ``***`` in text and in JSON-like data."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and s.strip()}
        self.secrets = sorted(unique, key=len, reverse=True)  # longest first: overlapping values
        forms = {form for s in self.secrets for form in _forms(s) if form.strip()}
        ordered = sorted(forms, key=len, reverse=True)
        #: each form as it reads inside a JSON text (escaped once more): what :meth:`_absent` looks for
        self._in_json = sorted({json.dumps(form, ensure_ascii=False)[1:-1] for form in ordered}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def redact(self, text: str) -> str:
        if self._pattern is None or not isinstance(text, str):
            return text
        return self._pattern.sub(REDACTED, text)

    def redact_obj(self, value: Any) -> Any:
        """A copy of dicts/lists/tuples/strings with secrets redacted (keys too); other values as is."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, (Mapping, list, tuple)) and self._absent(value):
            return value  # nothing to hide (the usual case): no copy, no walk in Python
        return self._walk(value)

    def _absent(self, value: Any) -> bool:
        """No secret in ``value``, told from its JSON text in one pass of C code. JSON escapes each
        character on its own, so the text of a string holding any form of a secret holds that form
        JSON-escaped, which is searched for; a value JSON cannot write falls back to the walk."""
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            return False
        return not any(form in text for form in self._in_json)  # substring tests: quicker than the pattern

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {self.redact(k) if isinstance(k, str) else k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._walk(v) for v in value)
        return value


_lock = threading.Lock()
_secrets: set[str] = set()
_current = Redactor()


class _LogFilter(logging.Filter):
    """Redacts a record's final message (arguments included) before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _current:
            try:
                message = record.getMessage()
            except Exception:  # a bad format string is logging's problem, not ours
                return True
            record.msg, record.args = _current.redact(message), None
        return True


_FILTER = _LogFilter()


def register(*values: str) -> None:
    """Treat these values as secrets from now on in this process."""
    global _current
    fresh = {v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_LENGTH} - _secrets
    if not fresh:
        return
    with _lock:
        _secrets.update(fresh)
        _current = Redactor(_secrets)
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)


def secrets() -> list[str]:
    """The registered secrets, longest first."""
    return list(_current.secrets)


def clear() -> None:
    """Forget every registered secret (a new session starts)."""
    global _current
    with _lock:
        _secrets.clear()
        _current = Redactor()


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    return _current.redact(text)


def redact_obj(value: Any) -> Any:
    """A copy of JSON-like data with every registered secret replaced by ``***`` (keys too)."""
    return _current.redact_obj(value)


#: A variable whose name says it holds a secret: its value is masked whatever it looks like.
_SECRET_NAME = re.compile(r"(?i)token|key|secret|pass|pin|auth|cred|session|cookie|sig")
_PORT_SIZED = re.compile(r"\d{1,5}")


def register_env(name: str, value: str) -> None:
    """Register the value of ``${name}`` as a secret, unless it is plainly not one: a port-sized
    number (at most 5 digits) of a variable whose name does not say secret. Masking such a value
    would shred every URL and count it appears in (``http://127.0.0.1:***/v1``) and hide nothing
    an attacker could use; ``${BOT_PIN}`` = 1234 is still masked by its name."""
    if _PORT_SIZED.fullmatch(value.strip()) and not _SECRET_NAME.search(name):
        return
    register(value)


def register_configured_secrets(*tables: Any) -> None:
    """Register the environment values that agent tables refer to, before any agent is built.

    The process that writes results (the xdist controller) may never build an agent itself.
    """
    for table in tables:
        if isinstance(table, str):
            names = re.findall(r"\$\{(\w+)\}", table)
            for name in names:
                if name in os.environ:
                    register_env(name, os.environ[name])
            if names and "@" in table:
                register_url_credentials(re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), table))
        elif isinstance(table, Mapping):
            if isinstance(table.get("api_key_env"), str):  # a builtin agent's key, read from that variable
                register_llm_keys(table["api_key_env"])
            register_configured_secrets(*table.values())
        elif isinstance(table, (list, tuple)):
            register_configured_secrets(*table)


#: The environment variables fabtest itself reads an LLM key from (llm/gemini.py, llm/openai_compat.py).
LLM_KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY")


def register_llm_keys(*names: str | None, environ: Mapping[str, str] | None = None) -> None:
    """Register the values of the LLM key variables (and of ``names``, a configured ``api_key_env``).

    fabtest holds these keys whether or not an agent table mentions them; an agent in the same
    environment can read and echo them, so they are redacted like any ``${VAR}``."""
    source = os.environ if environ is None else environ
    for name in (*LLM_KEY_ENV_VARS, *names):
        value = source.get(name, "").strip() if name else ""
        if value:
            register(value)


def register_url_credentials(url: str) -> None:
    """Register ``user:password`` of a URL's userinfo (``https://bot:${PASS}@host``): httpx sends it as
    ``Authorization: Basic base64(user:password)``, which an agent that echoes its request headers
    would otherwise put in the results, with the password's own base64 split across 3 byte offsets."""
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if parts.password:
        register(f"{unquote(parts.username or '')}:{unquote(parts.password)}", unquote(parts.password))


def register_project_secrets(pyproject: str | os.PathLike[str] = "pyproject.toml") -> None:
    """The secrets a run of this project masks, for a command that writes or serves without running it
    (``fabtest import``, ``view``, ``mutate``, ``shrink``): the LLM keys and the ``${VAR}`` values of
    ``[tool.fabtest]``'s agent tables. A missing or broken file registers the LLM keys only (the
    command that needs the configuration says what is wrong with it)."""
    import tomllib
    from pathlib import Path

    register_llm_keys()
    try:
        data = tomllib.loads(Path(pyproject).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return
    tool = data.get("tool")
    table = tool.get("fabtest") if isinstance(tool, dict) else None
    if isinstance(table, dict):
        register_configured_secrets(table)


#: The personal data masked by default in logged conversations (``[tool.fabtest.redact]``), each with
#: the placeholder its matches become. Phone numbers: a leading ``+`` or ``0`` and 7 to 15 digits with
#: spaces, dots, dashes or brackets between them; cards: 13 to 19 digits in groups, checked by Luhn.
PERSONAL_DATA: dict[str, tuple[str, str]] = {
    "emails": (r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}", "[email]"),
    "cards": (r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)", "[card]"),
    "phones": (r"(?<![\w+])(?:\+|0)\d(?:[\s.()/-]{0,2}\d){6,14}(?!\d)", "[phone]"),
}


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


class PersonalData:
    """Masks personal data (not secrets: values fabtest never held) in text and JSON-like data: the
    kinds of :data:`PERSONAL_DATA` that are on, then ``extra`` regular expressions (``[redacted]``).
    Logged conversations pass through it before the judge sees them or anything is written, and
    through :func:`redact` too, so a secret in a log is masked like one in a run."""

    def __init__(self, kinds: Iterable[str] = tuple(PERSONAL_DATA), extra: Iterable[str] = ()) -> None:
        self._rules = [(re.compile(PERSONAL_DATA[k][0]), PERSONAL_DATA[k][1], k == "cards") for k in PERSONAL_DATA
                       if k in set(kinds)]
        self._rules += [(re.compile(p), "[redacted]", False) for p in extra]

    def text(self, value: str) -> str:
        for pattern, placeholder, luhn in self._rules:
            if luhn:
                value = pattern.sub(lambda m, p=placeholder: p if _luhn(re.sub(r"\D", "", m.group()))  # type: ignore[misc]
                                    else m.group(), value)
            else:
                value = pattern.sub(placeholder, value)
        return redact(value)

    def obj(self, value: Any) -> Any:
        """A copy of JSON-like data with every string masked (keys kept: they are names, not data)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.obj(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.obj(v) for v in value]
        return value
