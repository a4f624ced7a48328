"""The journaled chat model: a LangChain chat model whose calls go through Tether's journal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from tether.integrations._bridge import journaled_model
from tether.integrations.langgraph._convert import (
    from_langchain,
    message_text,
    response_from_ai,
    to_ai_message,
)
from tether.integrations.langgraph._tools import JournaledTool
from tether.messages import Mediation, ModelRequest, ModelResponse, ToolSpec
from tether.models import DeltaSink, StreamDelta

__all__ = ("JournaledChatModel", "model_id", "model_provider")

AnyTool = dict[str, Any] | type | Callable[..., Any] | BaseTool

# The inner call must not reach the graph's callbacks: LangGraph's "messages" stream would
# show the provider's message next to the journaled one (and only live, never on replay).
_QUIET: RunnableConfig = {"callbacks": []}


def model_id(model: BaseChatModel) -> str:
    """The model name recorded with each call (the provider's model name when it has one)."""
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return model._llm_type


def model_provider(model: BaseChatModel) -> str | None:
    """The provider ``model`` calls, as LangChain names it (``ls_provider``: ``openai`` for
    ``ChatOpenAI``), for tracing; ``None`` if it cannot say."""
    try:
        provider = model._get_ls_params().get("ls_provider")
    except Exception:  # a model's tracing params never fail its call
        return None
    return provider if isinstance(provider, str) and provider else None


class JournaledChatModel(BaseChatModel):
    """Wraps ``inner``: each call is served from the journal when recorded, else made once.

    Whatever ``inner`` answers, the graph gets the message rebuilt from the journaled
    response, live and on replay alike, so both runs see the same thing. Only usable inside
    a durable run (``durable`` sets that up); ``bind_tools`` works as usual.
    """

    inner: BaseChatModel
    bound_tools: list[AnyTool] = Field(default_factory=list)
    bound_tool_choice: str | None = None

    @property
    def _llm_type(self) -> str:
        return f"tether-journaled-{self.inner._llm_type}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"inner": model_id(self.inner)}

    def bind_tools(
        self,
        tools: Sequence[AnyTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The same model with ``tools`` offered on each call (the journal hashes them too)."""
        bound = self.model_copy(
            update={"bound_tools": list(tools), "bound_tool_choice": tool_choice}
        )
        return bound.bind(**kwargs) if kwargs else bound

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("a journaled model runs in async graphs (ainvoke / astream)")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        settings: dict[str, Any] = {"stop": stop} if stop else {}
        request = ModelRequest(
            model=model_id(self.inner),
            messages=tuple(from_langchain(messages)),
            tools=tuple(self._specs()),
            tool_choice=self.bound_tool_choice,
            settings=settings,
        )

        async def native(stream: DeltaSink | None) -> ModelResponse:
            return await self._call_inner(messages, stop, stream, **kwargs)

        response = await journaled_model(request, native, provider=model_provider(self.inner))
        message = to_ai_message(response.message, usage=response.usage)
        if response.finish_reason is not None:
            message.response_metadata["finish_reason"] = response.finish_reason
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _specs(self) -> list[ToolSpec]:
        specs: list[ToolSpec] = []
        for tool in self.bound_tools:
            mediation, idempotent = Mediation.HOST, False
            if isinstance(tool, JournaledTool):
                mediation, idempotent = tool.mediation, tool.idempotent
                tool = tool.inner
            function = convert_to_openai_tool(tool)["function"]
            specs.append(
                ToolSpec(
                    name=function["name"],
                    description=function.get("description", ""),
                    parameters=function.get("parameters", {"type": "object", "properties": {}}),
                    mediation=mediation,
                    idempotent=idempotent,
                )
            )
        return specs

    async def _call_inner(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        stream: DeltaSink | None,
        **kwargs: Any,
    ) -> ModelResponse:
        runnable: Runnable[LanguageModelInput, BaseMessage] = self.inner
        if self.bound_tools:
            natives = [t.inner if isinstance(t, JournaledTool) else t for t in self.bound_tools]
            try:
                runnable = self.inner.bind_tools(natives, tool_choice=self.bound_tool_choice)
            except NotImplementedError:
                pass  # a model without tool support (a test double) is asked as it is
        if stop:
            kwargs["stop"] = stop
        if stream is None:
            answer = await runnable.ainvoke(messages, _QUIET, **kwargs)
        else:
            answer = await _streamed(runnable, messages, stream, **kwargs)
        if not isinstance(answer, AIMessage):
            raise TypeError(
                f"{model_id(self.inner)} answered {type(answer).__name__}, not AIMessage"
            )
        return response_from_ai(answer)


async def _streamed(
    runnable: Runnable[LanguageModelInput, BaseMessage],
    messages: list[BaseMessage],
    stream: DeltaSink,
    **kwargs: Any,
) -> BaseMessage:
    whole: AIMessageChunk | None = None
    async for chunk in runnable.astream(messages, _QUIET, **kwargs):
        if not isinstance(chunk, AIMessage):
            continue
        text = message_text(chunk.content)
        if text:
            await stream(StreamDelta("text", text))
        if not isinstance(chunk, AIMessageChunk):
            return chunk  # a model that does not stream answers in one piece
        whole = chunk if whole is None else whole + chunk
    if whole is None:
        raise ValueError("the model streamed no message")
    return AIMessage(
        content=whole.content,
        tool_calls=whole.tool_calls,
        usage_metadata=whole.usage_metadata,
        response_metadata=whole.response_metadata,
    )
