"""``tether prune`` and the retention options of ``tether serve`` (issue 22, item 3): what would
go is shown first; a truncated log still verifies, exports, imports and replays."""

from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import pytest

from tether.records import LogTruncated

from ..processes import eventually
from .conftest import start_server
from .test_export import APP, cli, error, fresh_store, recorded, stored

pytestmark = pytest.mark.process

__all__ = ("fresh_store",)  # the fixture, used here by name

WAIT = 30.0
MESSAGES = [f"message {n}" for n in range(8)]


def test_prune_shows_then_cuts_and_the_log_still_verifies_exports_and_replays(
    fresh_store: Callable[[], str], tmp_path: Path
) -> None:
    source = fresh_store()
    conversation_id = recorded(source, *MESSAGES)
    _, before = stored(source, conversation_id)
    head = before[-1].seq

    shown = cli("prune", "--store", source, "--keep-records", "20", "--dry-run").stdout
    assert "truncate" in shown and "forecaster/" in shown
    assert "would erase 0 session(s) and truncate 1 log(s) of 1 (dry run" in shown
    assert stored(source, conversation_id)[1] == before

    done = cli("prune", "--store", source, "--keep-records", "20").stdout
    assert "erased 0 session(s) and truncated 1 log(s) of 1" in done
    _, after = stored(source, conversation_id)
    assert after[0].kind == LogTruncated.KIND and after[-1] == before[-1]
    assert head - after[0].seq >= 20
    verified = cli("verify", conversation_id, "--store", source).stdout
    cut = after[0].seq
    assert (
        verified
        == f"ok: records {cut}..{head} verified (1..{cut} replaced by a log_truncated record)\n"
    )
    assert "nothing to prune" in cli("prune", "--store", source, "--keep-records", "20").stdout

    exported = tmp_path / "s.jsonl"
    exported.write_bytes(cli("export", conversation_id, "--store", source).stdout_bytes)
    first = orjson.loads(exported.read_bytes().splitlines()[0])
    assert (first["kind"], first["seq"]) == (LogTruncated.KIND, after[0].seq)
    target = fresh_store()
    # Its first record vouches only for itself: taken as it is when asked to (issue 36).
    refused = error(cli("import", str(exported), "--store", target, code=1))
    assert f"the log starts at its log_truncated record (seq {cut})" in refused
    assert refused.endswith("(--allow-truncated takes it as it is); nothing was imported")
    done = cli("import", str(exported), "--store", target, "--allow-truncated").stdout
    assert done == (
        f"imported conversation {conversation_id} (forecaster/ann/default): {len(after)} "
        f"records, the chain verified from its log_truncated record at seq {cut} (what came "
        "before cannot be); unsigned: nothing proves where it came from\n"
    )
    assert stored(target, conversation_id)[1] == after
    replayed = cli("replay", "--from", str(exported), "--app", f"{APP}:agents").stdout
    assert replayed.startswith("identical: ") and "model and tool invocations: 0" in replayed


def test_a_policy_is_checked_before_anything_is_opened(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'none'}"
    for bad in ("x", "0", "-3", "inf", "forever", "audit=soon"):
        refused = cli("prune", "--store", store, "--retain-days", bad, code=2)
        assert "--retain-days" in refused.stderr or "DAYS" in refused.stderr
    nothing = cli("prune", "--store", store, code=2)
    assert "give --retain-days and/or --keep-records" in nothing.stderr
    cli("prune", "--store", store, "--keep-records", "0", code=2)
    missing = cli("prune", "--store", store, "--retain-days", "30", code=6)
    assert "no store" in error(missing)


def test_serve_prunes_idle_sessions_in_the_background(tmp_path: Path) -> None:
    """``--retain-days`` on a real server: a session idle past it (here two seconds) is
    erased by the server's own pruner; one of an agent kept forever stays."""
    server = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        "--retain-days",
        str(2 / 86400),
        "--retain-days",
        "researcher=forever",
        "--prune-every",
        "1",
    )
    try:
        for agent in ("assistant", "researcher"):
            sent = httpx.post(
                f"{server.url}/agents/{agent}/me",
                params={"wait": True},
                json={"body": "hello"},
                timeout=WAIT,
            )
            assert sent.status_code == 200, sent.text

        def agents() -> list[str]:
            listed = httpx.get(f"{server.url}/sessions", timeout=WAIT).json()["sessions"]
            return [item["agent"] for item in listed]

        eventually(lambda: agents() == ["researcher"], "only the researcher's session left")
    finally:
        server.stop()
