"""The blocking client against ``tether serve --demo`` processes: a followed stream that
goes on across a SIGKILL of the server and its restart on the same data and port, missing
nothing and repeating nothing; then, on the restarted server, a message followed through its
approval to its end."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tether import errors
from tether.client import Backoff, TetherClient

from ..cli.conftest import start_server, start_server_on

pytestmark = pytest.mark.process


def test_a_followed_stream_survives_a_kill_9_of_the_server(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    server = start_server(data, log)
    port = int(server.url.rsplit(":", 1)[1])
    client = TetherClient(server.url, backoff=Backoff(first=0.05, most=0.5, give_up_after=60))
    resumed: list[str] = []

    def note_resumption(request: httpx.Request) -> None:
        if "Last-Event-ID" in request.headers and request.url.params.get("follow"):
            resumed.append(request.headers["Last-Event-ID"])

    client.http.event_hooks["request"].append(note_resumption)
    with client:
        first = client.send("assistant", "ann", "hello")
        assert first.settled
        live = client.stream("assistant", "ann")
        seen = [next(live) for _ in range(3)]  # the rest of the first turn is still unread

        server.kill()
        server = start_server_on(port, data, log)
        second = client.send("assistant", "ann", "and again")
        assert second.settled and second.conversation_id == first.conversation_id

        whole = list(client.stream("assistant", "ann", follow=False))
        assert len(whole) > len(seen)
        while seen[-1].id != whole[-1].id:
            seen.append(next(live))
        live.close()
        # Reopened once, after the last event the first server sent (what it had written
        # before it was killed is read to its end first), and the second turn's events came
        # from the restarted server on the resumed stream.
        assert len(resumed) == 1 and resumed[0] in [item.id for item in seen[2:-1]]
        assert [item.id for item in seen] == [item.id for item in whole]  # no gap, no repeat
        assert [item.data for item in seen] == [item.data for item in whole]
        assert client.verify(first.conversation_id).ok

        # The blocking client's flows, on the restarted server: an approval, then the end.
        held = client.send("assistant", "me", "email bob@example.com: hi")
        assert held.approval is not None and held.approval.args["to"] == "bob@example.com"
        client.decide(held.approval.approval_id, "approve", approver="Ann")
        done = client.wait(held)
        assert done.settlement is not None and done.settlement.status == "succeeded"
        records = list(client.stream_records("assistant", "me", follow=False))
        assert "approval_decided" in [item.event for item in records]
        assert client.export(done.conversation_id).count(b"\n") == len(records) + 1
        with pytest.raises(errors.UnknownAgent):
            client.records("nobody", "me")
    server.stop()
