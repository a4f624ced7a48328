"""``ScriptedModel``'s bookkeeping: a long-running keyless server's model need keep nothing."""

from tether.messages import Message, ModelRequest
from tether.models import ScriptedModel


async def test_record_false_keeps_no_request_and_still_counts_them() -> None:
    request = ModelRequest(model="m", messages=(Message.user("hi"),))
    for record in (True, False):
        model = ScriptedModel(["one", "two"], record=record)
        first = await model.request(request)
        second = await model.request(request)
        assert (first.message.text, second.message.text) == ("one", "two")
        assert model.invocations == 2
        assert len(model.calls) == (2 if record else 0)


async def test_a_delay_spaces_the_streamed_chunks() -> None:
    """Each chunk after the first waits ``delay`` (a reader can watch it stream)."""
    from tether.models import StreamDelta

    request = ModelRequest(model="m", messages=(Message.user("hi"),))
    model = ScriptedModel(["abcdef"], chunk=2, delay=0.01)
    pieces: list[str] = []

    async def sink(delta: StreamDelta) -> None:
        pieces.append(delta.text)

    await model.request(request, sink)
    assert pieces == ["ab", "cd", "ef"]
