"""``serve`` and ``worker`` settings from flags, ``TETHER_*`` variables and ``tether.toml``
(or ``[tool.tether]``): flag > environment > file > default, a bad value in one line naming
its source (exit 11), ``tether config`` with secrets masked, and a model that keeps up with
the commands' flags and with docs/serving.md."""

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tether.cli import app
from tether.cli._exit import ExitCode
from tether.cli._settings import (
    ServeSettings,
    WorkerSettings,
    reference_table,
    resolve,
)

ROOT = Path(__file__).parents[2]
runner = CliRunner()


def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test in a directory of its own, with no TETHER_* variable of the caller's."""
    monkeypatch.chdir(tmp_path)
    for name in ("TETHER_AUTH_TOKEN", "TETHER_PORT", "TETHER_HOST", "TETHER_STORE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_each_source_over_the_next(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text('port = 1111\nhost = "file.invalid"\nlease = 5\n')
    environ = {"TETHER_PORT": "2222", "TETHER_LEASE": "6"}
    resolved = resolve(ServeSettings, given={"lease": 7.0}, environ=environ)
    assert resolved.settings.lease == 7.0 and resolved.sources["lease"] == "--lease"  # flag > env
    assert (
        resolved.settings.port == 2222 and resolved.sources["port"] == "TETHER_PORT"
    )  # env > file
    assert resolved.settings.host == "file.invalid" and resolved.sources["host"] == "tether.toml"
    assert resolved.settings.heartbeat == 15.0 and not resolved.given("heartbeat")  # default
    flag_over_file = resolve(ServeSettings, given={"host": "flag.invalid"}, environ={})
    assert flag_over_file.settings.host == "flag.invalid"


def test_serve_takes_its_flags_over_variables_over_the_file(tmp_path: Path) -> None:
    """Through the command itself: each run stops where it would listen, naming the host."""
    (tmp_path / "tether.toml").write_text('host = "file.invalid"\nallow-unauthenticated = true\n')
    for env, args, host in (
        ({}, (), "file.invalid"),
        ({"TETHER_HOST": "env.invalid"}, (), "env.invalid"),
        ({"TETHER_HOST": "env.invalid"}, ("--host", "flag.invalid"), "flag.invalid"),
    ):
        done = _run("serve", "--demo", "--port", "0", *args, env=env)
        assert done.exit_code == ExitCode.ADDRESS_UNAVAILABLE, done.output
        assert f"cannot listen on {host}:0" in done.output


def test_the_variables_tether_read_before_keep_working() -> None:
    environ = {
        "TETHER_ALLOWED_HOSTS": "a.example.com, b.example.com",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "TETHER_JWKS_URL": "https://issuer/jwks",
        "TETHER_AUTH_TOKEN": "t0ken-value",
        "TETHER_SCHEDULE_MIN_PERIOD": "0.5",
    }
    settings = resolve(ServeSettings, environ=environ).settings
    assert settings.allowed_host == ["a.example.com, b.example.com"]  # serve splits it
    assert settings.otlp_endpoint == "http://collector:4318"
    assert settings.jwks == "https://issuer/jwks" and settings.auth_token == "t0ken-value"
    assert settings.schedule_min_period == 0.5


@pytest.mark.parametrize(
    ("env", "file", "message"),
    [
        ({"TETHER_PORT": "abc"}, None, "TETHER_PORT: port: Input should be a valid integer"),
        ({"TETHER_LEASE": "0.1"}, None, "TETHER_LEASE: lease: Input should be greater than"),
        ({}, "port = 70000", "tether.toml: port: Input should be less than or equal to 65535"),
        ({}, 'demo = "maybe"', "tether.toml: demo: Input should be a valid boolean"),
        ({}, "prot = 1", "tether.toml: prot: not a setting of tether serve or tether worker"),
        ({}, "[worker]\nport = 1", "tether.toml: worker.port: not a setting of tether worker"),
        ({}, "port = ", "tether.toml: not TOML: "),
    ],
)
def test_a_bad_value_is_one_line_naming_its_source(
    tmp_path: Path, env: dict[str, str], file: str | None, message: str
) -> None:
    if file is not None:
        (tmp_path / "tether.toml").write_text(file + "\n")
    for command in (["config"], ["serve", "--demo"]):
        done = _run(*command, env=env)
        assert done.exit_code == ExitCode.BAD_CONFIG, done.output
        [line] = done.output.strip().splitlines()
        assert line.startswith(f"error: {message}"), line


def test_a_named_config_file_and_the_pyproject_form(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.tether]\nport = 3\n')
    assert "pyproject.toml [tool.tether]" in _run("config").output
    assert resolve(ServeSettings).settings.port == 3
    (tmp_path / "tether.toml").write_text("port = 4\n[worker]\nlease = 9\n")
    assert resolve(ServeSettings).settings.port == 4  # tether.toml before pyproject.toml
    assert (
        resolve(WorkerSettings).settings.lease == 9 and resolve(ServeSettings).settings.lease == 30
    )
    (tmp_path / "other.toml").write_text("port = 5\n")
    assert resolve(ServeSettings, config=tmp_path / "other.toml").settings.port == 5
    done = _run("config", env={"TETHER_CONFIG": str(tmp_path / "missing.toml")})
    assert done.exit_code == ExitCode.BAD_CONFIG and "cannot read it" in done.output


def test_config_shows_where_each_value_came_from_with_secrets_masked(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text(
        'store = "postgresql://tether:pg-s3cret@db/tether"\njwt-key = "hmac-s3cret"\n'
    )
    done = _run("config", env={"TETHER_AUTH_TOKEN": "t0ken-s3cret", "TETHER_PORT": "9000"})
    assert done.exit_code == 0, done.output
    assert "s3cret" not in done.output
    rows = {line.split()[0]: line.split()[1:] for line in done.output.splitlines()[2:]}
    assert rows["store"] == ["postgresql://tether:***@db/tether", "tether.toml"]
    assert rows["auth-token"] == ["***", "TETHER_AUTH_TOKEN"]
    assert rows["jwt-key"] == ["***", "tether.toml"]
    assert rows["port"] == ["9000", "TETHER_PORT"]
    assert rows["host"] == ["127.0.0.1", "default"]
    worker = _run("config", "--worker").output
    assert "tether worker" in worker and "port" not in worker


@pytest.mark.parametrize(("name", "model"), [("serve", ServeSettings), ("worker", WorkerSettings)])
def test_every_flag_has_a_setting_with_its_default(name: str, model: type[ServeSettings]) -> None:
    """A new flag joins the configuration by a field of the same name and default."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    flags = {param.name: param.default for param in command.params if param.name != "config"}
    assert set(flags) == set(model.model_fields)
    for flag, default in flags.items():
        assert model.model_fields[flag].default == default, flag


def test_the_reference_in_the_docs_is_the_models() -> None:
    assert reference_table() in (ROOT / "docs" / "serving.md").read_text()
