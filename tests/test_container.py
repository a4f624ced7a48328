"""The container image and its deployments, tested where no container engine runs (CI's
machine has the ``docker`` client only, no daemon, no Podman or Buildah): the ``Dockerfile``'s
``ENTRYPOINT`` and ``CMD`` run with its ``ENV`` from the installed package, its ``/data``
volume (and working directory) mapped to a scratch directory; ``compose.yaml``'s API and
worker commands run the same way against the real PostgreSQL; and the Kubernetes example of
docs/deploy.md is parsed and checked (docs/deploy.md, "The container image").
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from .postgres import fresh_schema, store_url
from .processes import free_port, log_text, reap, start, wait_ready_blocking

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DATA = "/data"
"""The image's volume and working directory, mapped to a scratch directory here."""


@dataclass
class Image:
    """What the Dockerfile's final stage says about the container it makes."""

    stages: list[str] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)
    user: str = "root"
    workdir: str = "/"
    volumes: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    """The final stage's ``RUN`` lines."""
    copies: list[str] = field(default_factory=list)
    builds: list[str] = field(default_factory=list)
    """Every stage's ``RUN`` lines."""


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` in order: comments dropped, continued lines joined."""
    joined = re.sub(r"\\\n(?:\s*#[^\n]*\n)*", " ", re.sub(r"(?m)^\s*#.*\n", "", text))
    found = []
    for line in joined.splitlines():
        if line.strip():
            name, _, rest = line.strip().partition(" ")
            found.append((name.upper(), rest.strip()))
    return found


def _exec_form(arguments: str) -> list[str]:
    parsed = json.loads(arguments)
    assert isinstance(parsed, list) and all(isinstance(a, str) for a in parsed), arguments
    return parsed


def read_dockerfile() -> Image:
    image = Image()
    for name, rest in _instructions((ROOT / "Dockerfile").read_text()):
        if name == "ARG":
            key, _, default = rest.partition("=")
            image.args[key] = default
        elif name == "FROM":
            base = re.sub(r"\$\{(\w+)\}", lambda m: image.args[m.group(1)], rest.split()[0])
            image.stages.append(rest.replace(rest.split()[0], base, 1))
            image.env, image.user, image.workdir = {}, "root", "/"
            image.runs, image.copies = [], []
        elif name == "ENV":
            image.env.update(dict(item.split("=", 1) for item in shlex.split(rest)))
        elif name == "ENTRYPOINT":
            image.entrypoint = _exec_form(rest)
        elif name == "CMD":
            image.cmd = _exec_form(rest)
        elif name == "HEALTHCHECK":
            image.healthcheck = _exec_form(rest[rest.index("CMD ") + 4 :])
        elif name == "USER":
            image.user = rest
        elif name == "WORKDIR":
            image.workdir = rest
        elif name == "VOLUME":
            image.volumes += _exec_form(rest)
        elif name == "RUN":
            image.runs.append(rest)
            image.builds.append(rest)
        elif name == "COPY":
            image.copies.append(rest)
    return image


IMAGE = read_dockerfile()


def _mapped(value: str, data: Path) -> str:
    """``value`` with the image's ``/data`` at ``data``."""
    return re.sub(rf"(?<!\w){DATA}(?=/|$)", str(data), value)


def _program(argv: list[str]) -> list[str]:
    """``argv`` as this virtualenv runs it: ``tether`` and ``python`` are its own."""
    first = {"tether": str(BIN / "tether"), "python": sys.executable}.get(argv[0], argv[0])
    return [first, *argv[1:]]


def image_environment(data: Path, **extra: str) -> dict[str, str]:
    """The image's ``ENV`` over this machine's environment less its own ``TETHER_*``."""
    machine = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    return {**machine, **{k: _mapped(v, data) for k, v in IMAGE.env.items()}, **extra}


def run_image(
    data: Path, log: Path, *args: str, port: int | None = None, **env: str
) -> subprocess.Popen[bytes]:
    """The container's command, ``ENTRYPOINT`` + (``args`` or ``CMD``), in ``data``, on
    ``port`` (given as ``TETHER_PORT`` and, for a build that does not read it, ``--port``)."""
    data.mkdir(exist_ok=True)
    command = [*IMAGE.entrypoint, *(args or IMAGE.cmd)]
    ports = ["--port", str(port)] if port is not None else []
    settings = {"TETHER_PORT": str(port)} if port is not None else {}
    with log.open("ab") as out:
        return start(
            [*_program([_mapped(a, data) for a in command]), *ports],
            cwd=data,
            stdout=out,
            stderr=out,
            env=image_environment(data, **settings, **env),
        )


def healthcheck(data: Path, port: int) -> int:
    """The image's own ``HEALTHCHECK`` command's exit status against ``port``."""
    return subprocess.run(
        _program(IMAGE.healthcheck),
        env=image_environment(data, TETHER_PORT=str(port)),
        capture_output=True,
        timeout=60,
        check=False,
    ).returncode


def test_the_image_is_slim_multi_stage_and_runs_as_no_root() -> None:
    builder, runtime = IMAGE.stages
    assert re.match(r"python:3\.\d+-slim(\s|$)", builder) and " AS " in builder.upper()
    assert runtime.startswith(builder.split()[0])
    assert any("python -m build --wheel" in run for run in IMAGE.builds)
    assert any(copy.startswith("--from=wheel ") for copy in IMAGE.copies)
    assert any(re.search(r"pip install .*tether-\*\.whl\)\[postgres\]", run) for run in IMAGE.runs)
    assert IMAGE.user not in ("root", "0", "")
    assert IMAGE.volumes == [DATA] and IMAGE.workdir == DATA
    assert IMAGE.entrypoint == ["tether", "serve"]
    assert "/healthz" in " ".join(IMAGE.healthcheck)
    assert "--allow-unauthenticated" not in IMAGE.cmd  # the safe default: a token is needed
    assert IMAGE.env["TETHER_STORE"].startswith(f"sqlite:///{DATA}/")
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv-*", "tether-data"} <= set(dockerignore)


def test_the_image_refuses_to_serve_all_interfaces_without_a_token(tmp_path: Path) -> None:
    log = tmp_path / "image.log"
    process = run_image(tmp_path / "data", log, port=free_port())
    assert process.wait(60) == 2, log_text(log)
    assert "refusing to serve 0.0.0.0 without --auth" in log_text(log)


def test_the_image_serves_the_demo_with_a_token_and_keeps_its_store_on_the_volume(
    tmp_path: Path,
) -> None:
    data, log, port = tmp_path / "data", tmp_path / "image.log", free_port()
    process = run_image(data, log, port=port, TETHER_AUTH_TOKEN="s3cret")
    url = f"http://127.0.0.1:{port}"
    wait_ready_blocking(url, process, log)
    assert healthcheck(data, port) == 0
    with httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/healthz").json() == {"ok": True}
        path, body, wait = "/agents/assistant/me", {"body": "hello"}, {"wait": "true"}
        assert client.post(path, json=body, params=wait).status_code == 401
        token = {"authorization": "Bearer s3cret"}
        answer = client.post(path, json=body, params=wait, headers=token)
        assert answer.json()["status"] == "succeeded", answer.text
    reap(process)
    assert process.returncode == 0, log_text(log)
    assert (data / "tether-data" / "tether.db").is_file()  # TETHER_STORE, on the volume
    assert healthcheck(data, port) != 0  # nobody answers: unhealthy


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _service_argv(service: dict[str, Any]) -> list[str]:
    return [*service.get("entrypoint", IMAGE.entrypoint), *service.get("command", IMAGE.cmd)]


def test_compose_runs_postgres_one_api_process_and_two_workers() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "api", "worker-1", "worker-2"}
    assert services["postgres"]["image"].startswith("postgres:")
    api = _service_argv(services["api"])
    assert api[:2] == ["tether", "serve"] and "--no-worker" in api
    assert "TETHER_AUTH_TOKEN" in services["api"]["environment"]
    stores = {api[api.index("--store") + 1]}
    for name in ("worker-1", "worker-2"):
        worker = _service_argv(services[name])
        assert worker[:2] == ["tether", "worker"]
        assert services[name]["healthcheck"] == {"disable": True}  # no HTTP to ask
        stores.add(worker[worker.index("--store") + 1])
    [store] = stores
    assert re.match(r"postgresql://[^@]+@postgres:5432/", store)
    for service in ("api", "worker-1", "worker-2"):
        assert services[service]["depends_on"]["postgres"]["condition"] == "service_healthy"
    guide = (ROOT / "docs" / "deploy.md").read_text()
    assert "tether serve --host 0.0.0.0 --no-worker --store postgresql://" in guide
    assert "tether worker --store postgresql://" in guide
    assert "`worker-1`, `worker-2`" in guide and "| `api` |" in guide


@pytest.mark.postgres
def test_the_compose_services_commands_run_a_message_on_postgres(tmp_path: Path) -> None:
    """The API (``--no-worker``) admits, one of the two workers runs it: the services'
    commands as compose.yaml gives them, the store at the test's PostgreSQL."""
    services = compose()["services"]
    url = store_url(fresh_schema())
    port = free_port()

    def run(name: str, **env: str) -> subprocess.Popen[bytes]:
        service = services[name]
        command = service.get("command", IMAGE.cmd)
        command = [url if arg.startswith("postgresql://") else arg for arg in command]
        entrypoint = service.get("entrypoint", IMAGE.entrypoint)
        log = tmp_path / f"{name}.log"
        ports = ["--port", str(port)] if name == "api" else []
        with log.open("ab") as out:
            return start(
                [*_program([*entrypoint, *command]), *ports],
                cwd=tmp_path,
                stdout=out,
                stderr=out,
                env=image_environment(tmp_path, TETHER_PORT=str(port), **env),
            )

    api = run("api", TETHER_AUTH_TOKEN="s3cret")
    workers = [run("worker-1"), run("worker-2")]
    wait_ready_blocking(f"http://127.0.0.1:{port}", api, tmp_path / "api.log")
    answer = httpx.post(
        f"http://127.0.0.1:{port}/agents/assistant/compose",
        params={"wait": "true"},
        json={"body": "hello"},
        headers={"authorization": "Bearer s3cret"},
        timeout=60,
    )
    assert answer.json()["status"] == "succeeded", (
        answer.text + log_text(tmp_path / "worker-1.log") + log_text(tmp_path / "worker-2.log")
    )
    for process in (api, *workers):
        process.send_signal(signal.SIGTERM)
    for process in (api, *workers):
        reap(process)
        assert process.returncode == 0


def kubernetes() -> list[dict[str, Any]]:
    guide = (ROOT / "docs" / "deploy.md").read_text()
    section = guide.split("## Kubernetes", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return [doc for doc in yaml.safe_load_all(block.group(1)) if doc]


def test_the_kubernetes_example_probes_the_api_and_runs_workers_apart() -> None:
    objects = {(o["kind"], o["metadata"]["name"]): o for o in kubernetes()}
    assert set(objects) == {
        ("Secret", "tether"),
        ("Deployment", "tether-api"),
        ("Deployment", "tether-worker"),
        ("Service", "tether-api"),
    }
    secret = objects["Secret", "tether"]["stringData"]
    [api] = objects["Deployment", "tether-api"]["spec"]["template"]["spec"]["containers"]
    assert "command" not in api  # the image's entrypoint: tether serve
    assert "--no-worker" in api["args"] and "--host" in api["args"]
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in api["env"] if "valueFrom" in e}
    assert secrets["TETHER_AUTH_TOKEN"] == {"name": "tether", "key": "auth-token"}
    assert {ref["key"] for ref in secrets.values()} <= set(secret)
    [worker] = objects["Deployment", "tether-worker"]["spec"]["template"]["spec"]["containers"]
    assert worker["command"] == ["tether", "worker"]
    assert "--app" in worker["args"] and worker["args"][:2] == ["--store", "$(TETHER_STORE)"]
    service = objects["Service", "tether-api"]["spec"]
    assert (
        service["selector"]
        == objects["Deployment", "tether-api"]["spec"]["selector"]["matchLabels"]
    )
    assert service["ports"][0]["targetPort"] == api["ports"][0]["name"]
