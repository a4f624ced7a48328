"""The settings of ``tether serve`` and ``tether worker``, from four sources: a flag on the
command line, then an environment variable (``TETHER_`` and the flag's name, upper case,
``-`` as ``_``: ``TETHER_PORT``), then a file (``--config FILE`` or ``TETHER_CONFIG``, else
``tether.toml`` in the working directory, else ``[tool.tether]`` in its ``pyproject.toml``),
then the default. pydantic-settings reads the environment; one model validates each source
on its own, so a bad value is reported in one line naming where it came from (exit
:attr:`ExitCode.BAD_CONFIG`), and :class:`Resolved` knows where each value came from
(``tether config`` prints it).

A file's keys are the flags' names (``auth-token``, or ``auth_token``); its top-level keys
are shared by both commands (each takes those it has), and a ``[serve]`` or ``[worker]``
table holds one command's own, over them.

A new flag of ``serve`` or ``worker`` joins by a field of the same name (and default) in
:class:`ServeSettings` or :class:`WorkerSettings`; tests/cli/test_settings.py fails on a flag
without one.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import typer
from pydantic import AliasChoices, BeforeValidator, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from tether._urls import redact_url
from tether.cli._exit import ExitCode, fail
from tether.cli._logs import LogFormat, LogLevel
from tether.cli._stores import DEFAULT_STORE_URL

__all__ = (
    "CONFIG_FILE",
    "ENV_PREFIX",
    "MASK",
    "PYPROJECT_TABLE",
    "Resolved",
    "ServeSettings",
    "Settings",
    "WorkerSettings",
    "env_names",
    "from_context",
    "reference_table",
    "resolve",
    "shown_value",
)

ENV_PREFIX = "TETHER_"
CONFIG_FILE = "tether.toml"
PYPROJECT_TABLE = ("tool", "tether")
MASK = "***"
_COMMANDS = ("serve", "worker")


def _one_or_many(value: object) -> object:
    """A repeatable option's value: one string (a variable's, or a file's ``key = "a"``)
    stands for a list of one (``serve`` splits it at commas and spaces)."""
    return [value] if isinstance(value, str) else value


Listed = Annotated[list[str] | None, NoDecode, BeforeValidator(_one_or_many)]


def _lowered(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


T = TypeVar("T")
Lowered = Annotated[T, BeforeValidator(_lowered)]
"""A choice given in any case (``TETHER_LOG_LEVEL=DEBUG``), as its flag takes it."""


def _env(*names: str) -> Any:
    """A field read from these variables (the first set wins) instead of ``TETHER_<NAME>``:
    a variable Tether read before this scheme, kept working."""
    return AliasChoices(*names)


class Settings(BaseSettings):
    """What both commands take. Field names are the flags' (``--prune-every``:
    ``prune_every``); ``json_schema_extra={"secret": True}`` marks a value ``tether config``
    masks (a URL's password is masked in any case)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        populate_by_name=True,
        case_sensitive=False,
        validate_default=False,
        env_ignore_empty=True,  # TETHER_AUTH_TOKEN="" is unset, as click always read it
    )
    command: ClassVar[str] = ""

    store: str = Field(DEFAULT_STORE_URL, description="Store URL.")
    app: str | None = Field(None, description="module:attr: a tether.App, or a factory.")
    demo: bool = Field(False, description="Register the keyless demo agents.")
    lease: float = Field(30.0, ge=0.5, description="Seconds a claim lasts unrenewed.")
    otlp_endpoint: str | None = Field(
        None,
        validation_alias=_env("TETHER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="Export spans and metrics to this OTLP/HTTP collector.",
    )
    retain_days: Listed = Field(None, description="[AGENT=]DAYS: erase idle sessions.")
    keep_records: int | None = Field(None, ge=1, description="Cut logs longer than this.")
    prune_every: float = Field(3600.0, ge=1.0, description="Seconds between prunes.")
    schedule_min_period: float = Field(
        1.0, ge=0.001, description="Seconds: the shortest schedule period."
    )
    log_format: Lowered[LogFormat] = Field(
        LogFormat.TEXT, description="text, or json: one JSON object a line."
    )
    log_level: Lowered[LogLevel] = Field(
        LogLevel.INFO, description="The least level logged: debug, info, warning, error."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Each source is validated on its own (see resolve), so a model is only ever built
        # from the values given to it.
        return (init_settings,)


class WorkerSettings(Settings):
    """``tether worker``'s settings."""

    command: ClassVar[str] = "worker"


class ServeSettings(Settings):
    """``tether serve``'s settings."""

    command: ClassVar[str] = "serve"

    host: str = Field("127.0.0.1", description="The address to listen on.")
    port: int = Field(8484, ge=0, le=65535, description="The port to listen on.")
    no_worker: bool = Field(False, description="Serve the API only.")
    mcp: bool = Field(False, description="Also serve the agents over MCP, at /mcp.")
    auth: str | None = Field(None, description="token, tokens, jwt or module:function.")
    authorize: str | None = Field(None, description="module:function: rules beyond scopes.")
    auth_token: str | None = Field(
        None, description="The shared bearer token.", json_schema_extra={"secret": True}
    )
    jwks: str | None = Field(
        None,
        validation_alias=_env("TETHER_JWKS", "TETHER_JWKS_URL"),
        description="With auth jwt: the issuer's JWKS URL.",
    )
    jwt_key: str | None = Field(
        None,
        description="With auth jwt: an HMAC secret, or @FILE.",
        json_schema_extra={"secret": True},
    )
    jwt_audience: str | None = Field(None, description="The audience a JWT must name.")
    jwt_issuer: str | None = Field(None, description="The issuer a JWT must name.")
    jwt_tenant_claim: str = Field("tenant", description="The claim naming the tenant.")
    jwt_scope_claim: str = Field("scope", description="The claim listing the scopes.")
    allow_unauthenticated: bool = Field(
        False, description="Serve a non-loopback address without auth."
    )
    allowed_host: Listed = Field(
        None,
        validation_alias=_env("TETHER_ALLOWED_HOST", "TETHER_ALLOWED_HOSTS"),
        description="Also answer requests for these Hosts.",
    )
    allowed_origin: Listed = Field(
        None,
        validation_alias=_env("TETHER_ALLOWED_ORIGIN", "TETHER_ALLOWED_ORIGINS"),
        description="Let pages of these origins change things.",
    )
    sign_in_hours: float = Field(12.0, ge=0.01, description="Hours a console sign-in lasts.")
    heartbeat: float = Field(15.0, description="Seconds between SSE heartbeats.")
    export_key_file: Path | None = Field(None, description="Sign exports with this key.")


S = TypeVar("S", bound=Settings)


def env_names(model: type[Settings], name: str) -> tuple[str, ...]:
    """The variables a field is read from, first first."""
    alias = model.model_fields[name].validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(choice) for choice in alias.choices)
    return (f"{ENV_PREFIX}{name.upper()}",)


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


@dataclass(frozen=True)
class Resolved(Generic[S]):
    """The settings of one command, and where each came from: ``--port`` (the command
    line), a variable's name, the file's name, or ``default``."""

    settings: S
    sources: Mapping[str, str]
    file: Path | None
    """The file read (``None``: none was found)."""

    def given(self, name: str) -> bool:
        """Whether ``name`` was set by a flag, a variable or a file (not its default): it
        then overrides what the App says."""
        return self.sources.get(name, "default") != "default"

    def rows(self) -> list[tuple[str, str, str]]:
        """``(key, value, source)`` for each setting, secrets masked."""
        model = type(self.settings)
        return [
            (
                name.replace("_", "-"),
                shown_value(model, name, getattr(self.settings, name)),
                self.sources.get(name, "default"),
            )
            for name in model.model_fields
        ]


def shown_value(model: type[Settings], name: str, value: object) -> str:
    """A setting as ``tether config`` shows it: a secret as ``***``, a URL's password
    masked."""
    if value is None:
        return "-"
    extra = model.model_fields[name].json_schema_extra
    if isinstance(extra, dict) and extra.get("secret"):
        return MASK
    if isinstance(value, list):
        return ", ".join(redact_url(str(item)) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return redact_url(str(value))


def resolve(
    model: type[S],
    *,
    given: Mapping[str, object] | None = None,
    config: Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Resolved[S]:
    """``model``'s settings: ``given`` (the flags on the command line) over the environment
    over the file over the defaults. Exits with :attr:`ExitCode.BAD_CONFIG` and one line
    naming the source of a bad value."""
    environ = os.environ if environ is None else environ
    file, table = _read_file(model, config, cwd or Path.cwd())
    layers: list[tuple[dict[str, object], dict[str, str]]] = [
        _validated(model, dict(given or {}), {name: _flag(name) for name in given or {}}),
        _from_env(model, environ),
    ]
    if file is not None:
        label = _file_label(file)
        layers.append(_validated(model, table, dict.fromkeys(table, label), label=label))
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for layer_values, layer_sources in reversed(layers):  # the file first, flags last
        values.update(layer_values)
        sources.update(layer_sources)
    return Resolved(model.model_validate(values), sources, file)


def from_context(ctx: typer.Context, model: type[S], config: Path | None) -> Resolved[S]:
    """:func:`resolve` for a running command: its flags are the parameters the command line
    gave (a variable or a default that click filled in is left to the sources above)."""
    given = {
        name: value
        for name, value in ctx.params.items()
        if name in model.model_fields
        and getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
    }
    return resolve(model, given=given, config=config)


def _validated(
    model: type[Settings],
    raw: dict[str, Any],
    sources: dict[str, str],
    *,
    label: str | None = None,
) -> tuple[dict[str, object], dict[str, str]]:
    """``raw`` checked on its own (every field has a default, so only what it gives is
    checked); a bad value exits naming ``sources``' entry for it."""
    try:
        checked = model.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        where = sources.get(key, label or "configuration")
        name = key.replace("_", "-") if key in model.model_fields else key
        shown = where if where.startswith("-") else f"{where}: {name}"
        fail(f"{shown}: {error['msg']}", ExitCode.BAD_CONFIG)
    return {name: getattr(checked, name) for name in checked.model_fields_set}, {
        name: sources[name] for name in checked.model_fields_set if name in sources
    }


def _from_env(
    model: type[Settings], environ: Mapping[str, str]
) -> tuple[dict[str, object], dict[str, str]]:
    """The variables set for ``model``'s fields, read by pydantic-settings, each named."""
    found = {key.upper(): key for key, value in environ.items() if value != ""}
    sources: dict[str, str] = {}
    raw: dict[str, Any] = {}
    for name in model.model_fields:
        for variable in env_names(model, name):
            if variable in found:
                sources[name] = variable
                break
    if sources:
        source = EnvSettingsSource(model, case_sensitive=False)
        source.env_vars = {key.lower(): value for key, value in environ.items()}
        raw = {
            name: value
            for name, value in ((_field_of(model, key), value) for key, value in source().items())
            if name in sources
        }
    return _validated(model, raw, sources)


def _field_of(model: type[Settings], key: str) -> str:
    """The field an environment source's key stands for (an alias is a variable's name)."""
    for name in model.model_fields:
        if key == name or key.upper() in env_names(model, name):
            return name
    return key


def _read_file(
    model: type[Settings], config: Path | None, cwd: Path
) -> tuple[Path | None, dict[str, Any]]:
    """The file to read and the keys it gives ``model``'s command (normalised to field
    names); exits with :attr:`ExitCode.BAD_CONFIG` if it cannot be read or names a key
    neither command has."""
    if config is not None:
        path: Path | None = config
    elif (cwd / CONFIG_FILE).is_file():
        path = cwd / CONFIG_FILE
    elif (cwd / "pyproject.toml").is_file():
        path = cwd / "pyproject.toml"
    else:
        path = None
    if path is None:
        return None, {}
    label = _file_label(path)
    try:
        document = tomllib.loads(path.read_text())
    except OSError as exc:
        fail(f"{label}: cannot read it: {exc.strerror}", ExitCode.BAD_CONFIG)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        fail(f"{label}: not TOML: {exc}", ExitCode.BAD_CONFIG)
    if path.name == "pyproject.toml" and config is None:
        document = document.get("tool", {}).get("tether")
        if document is None:  # a project's pyproject.toml that does not configure Tether
            return None, {}
    elif path.name == "pyproject.toml":
        document = document.get("tool", {}).get("tether", document)
    if not isinstance(document, dict):
        fail(f"{label}: [tool.tether] must be a table", ExitCode.BAD_CONFIG)
    return path, _table(model, document, label)


def _table(model: type[Settings], document: dict[str, Any], label: str) -> dict[str, Any]:
    known = set(ServeSettings.model_fields) | set(WorkerSettings.model_fields)
    shared: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in document.items():
        if key in _COMMANDS:
            if not isinstance(value, dict):
                fail(f"{label}: {key}: must be a table ([{key}])", ExitCode.BAD_CONFIG)
            for inner, inner_value in value.items():
                name = inner.replace("-", "_")
                commands = ServeSettings if key == "serve" else WorkerSettings
                if name not in commands.model_fields:
                    fail(
                        f"{label}: {key}.{inner}: not a setting of tether {key}",
                        ExitCode.BAD_CONFIG,
                    )
                if key == model.command:
                    own[name] = inner_value
            continue
        name = key.replace("-", "_")
        if name not in known:
            fail(
                f"{label}: {key}: not a setting of tether serve or tether worker",
                ExitCode.BAD_CONFIG,
            )
        if name in model.model_fields:
            shared[name] = value
    return {**shared, **own}


def _file_label(path: Path) -> str:
    shown = path.name if path.parent == Path.cwd() else str(path)
    return f"{shown} [tool.tether]" if path.name == "pyproject.toml" else shown


def reference_table() -> str:
    """The Markdown table of every setting (docs/serving.md holds it; a test keeps them
    equal): its flag, variable, file key, default, the commands that take it, and what it
    is."""
    rows = [
        "| flag | variable | `tether.toml` key | default | commands | what |",
        "|---|---|---|---|---|---|",
    ]
    for name, field in ServeSettings.model_fields.items():
        commands = "serve, worker" if name in WorkerSettings.model_fields else "serve"
        default = "-" if field.default is None else shown_value(ServeSettings, name, field.default)
        variables = ", ".join(f"`{variable}`" for variable in env_names(ServeSettings, name))
        rows.append(
            f"| `{_flag(name)}` | {variables} | `{name.replace('_', '-')}` | `{default}` "
            f"| {commands} | {field.description} |"
        )
    return "\n".join(rows)
