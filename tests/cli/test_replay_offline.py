"""``tether replay`` needs no provider key (issue 25 item 6): an app whose provider client is
built at import loads with no key set, and the replay sends nothing."""

import os
import subprocess
from pathlib import Path

import pytest

from tether.cli._offline import OFFLINE_KEY, PROVIDER_KEY_VARIABLES, offline_provider_keys

from .command import TETHER
from .test_export import recorded

pytestmark = pytest.mark.process

REPO = Path(__file__).parents[2]
APP = "tests.cli.client_at_import:agents"


def test_replay_loads_an_app_that_builds_its_client_at_import_with_no_key(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'store'}"
    conversation_id = recorded(url, "weather?")
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_KEY_VARIABLES}
    done = subprocess.run(
        [TETHER, "replay", conversation_id, "--app", APP, "--store", url],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "model and tool invocations: 0" in done.stdout


def test_only_unset_keys_get_the_placeholder_and_only_while_replaying() -> None:
    environ = {"OPENAI_API_KEY": "sk-real", "ANTHROPIC_API_KEY": ""}
    with offline_provider_keys(environ) as given:
        assert "OPENAI_API_KEY" not in given and "ANTHROPIC_API_KEY" in given
        assert environ["OPENAI_API_KEY"] == "sk-real"
        assert environ["ANTHROPIC_API_KEY"] == OFFLINE_KEY
        assert set(given) | {"OPENAI_API_KEY"} == set(PROVIDER_KEY_VARIABLES)
    assert environ == {"OPENAI_API_KEY": "sk-real", "ANTHROPIC_API_KEY": ""}
