"""The journaled chat model: a LangChain chat model whose calls go through Tether's journal."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableParallel,
    RunnableSequence,
    RunnableWithFallbacks,
)
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import (
    convert_to_openai_function,
    convert_to_openai_tool,
)
from pydantic import BaseModel, Field, JsonValue, ValidationError

from tether.integrations._bridge import journaled_model
from tether.integrations.langgraph._convert import (
    from_langchain,
    message_text,
    response_from_ai,
    to_ai_message,
)
from tether.integrations.langgraph._errors import UnsupportedConstruct, refuse
from tether.integrations.langgraph._sync import on_the_loop
from tether.integrations.langgraph._tools import JournaledTool
from tether.messages import Mediation, ModelRequest, ModelResponse, ToolSpec
from tether.models import DeltaSink, StreamDelta

__all__ = ("JournaledChatModel", "model_id", "model_provider")

AnyTool = dict[str, Any] | type | Callable[..., Any] | BaseTool
ToolChoice = str | bool | dict[str, Any]

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
    a durable run (``durable`` sets that up).

    ``bind_tools`` and ``with_structured_output`` are ``inner``'s own (ChatOpenAI's
    ``function_calling``, ``json_schema`` and ``json_mode`` methods alike), with the model
    call in what they return journaled: the arguments they bind reach each call and are part
    of its hash. ``with_config``, ``with_retry``, ``prompt | model`` wrap the journaled model
    as any runnable; a plain-function node's sync ``invoke`` / ``stream`` is journaled too.

    Example::

        def build(model, tools):
            judge = model.with_structured_output(Verdict, method="json_schema")
            ...  # await judge.ainvoke(state["messages"]) in a node: a journaled call
    """

    inner: BaseChatModel
    bound_tools: list[AnyTool] = Field(default_factory=list)
    bound_tool_choice: ToolChoice | None = None
    bound_options: dict[str, Any] = Field(default_factory=dict)
    """The other arguments ``bind_tools`` was given (``strict``, ``parallel_tool_calls``)."""
    cache: bool | None = False
    """Never LangChain's global LLM cache: an answer it gave would be in no log."""

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
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """``inner.bind_tools(tools, ...)``, journaled: the calls offer ``tools`` (the journal
        describes them by name and schema, hashed with each call)."""
        natives = [t.inner if isinstance(t, JournaledTool) else t for t in tools]
        bound = {"bound_tools": list(tools), "bound_tool_choice": tool_choice}
        # ChatOpenAI takes more kinds of choice (a dict, a bool) than BaseChatModel declares.
        options: dict[str, Any] = {"tool_choice": tool_choice, **kwargs}
        try:
            native = self.inner.bind_tools(natives, **options)
        except NotImplementedError:
            # A model without tool support (a test double) is asked as it is.
            journaled = self.model_copy(update=bound)
            return journaled.bind(**kwargs) if kwargs else journaled
        journaled = self.model_copy(update={**bound, "bound_options": kwargs})
        return journaled._around(native, "bind_tools")

    def with_structured_output(
        self, schema: dict[str, Any] | type, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """``inner.with_structured_output(...)``, journaled: its model call is recorded with
        what the method binds (a tool and its choice, a ``response_format``), its parser
        reads the journaled answer, live and on replay alike."""
        native = self.inner.with_structured_output(schema, include_raw=include_raw, **kwargs)
        return self._around(native, "with_structured_output")

    def _around(self, native: Runnable[Any, Any], method: str) -> Runnable[Any, Any]:
        """``native`` (what ``inner``'s ``method`` returned) with each chat model in it
        replaced by this journaled model around it; the bindings, steps and parsers stay."""
        swapped: list[BaseChatModel] = []

        def swap(runnable: Runnable[Any, Any]) -> Runnable[Any, Any]:
            if isinstance(runnable, JournaledChatModel):
                return runnable
            if isinstance(runnable, BaseChatModel):
                swapped.append(runnable)
                return self.model_copy(update={"inner": runnable})
            if isinstance(runnable, RunnableBindingBase):
                return runnable.model_copy(update={"bound": swap(runnable.bound)})
            if isinstance(runnable, RunnableSequence):
                first, *middle, last = [swap(step) for step in runnable.steps]
                return runnable.model_copy(update={"first": first, "middle": middle, "last": last})
            if isinstance(runnable, RunnableParallel):
                steps = {name: swap(step) for name, step in runnable.steps__.items()}
                return runnable.model_copy(update={"steps__": steps})
            if isinstance(runnable, RunnableWithFallbacks):
                update = {
                    "runnable": swap(runnable.runnable),
                    "fallbacks": [swap(f) for f in runnable.fallbacks],
                }
                return runnable.model_copy(update=update)
            return runnable

        journaled = swap(native)
        if not swapped:
            raise UnsupportedConstruct(
                f"{type(self.inner).__name__}.{method}() returned a {type(native).__name__} "
                "in which Tether finds no chat model to journal: call the model build() was "
                "given directly, or bind what you need with model.bind(...)"
            )
        return journaled

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return on_the_loop("model", lambda: self._agenerate(messages, stop, None, **kwargs))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        async def native(stream: DeltaSink | None) -> ModelResponse:
            return await self._ask_inner(messages, stop, stream, kwargs)

        request = self._request(messages, stop, kwargs)
        response = await journaled_model(request, native, provider=model_provider(self.inner))
        message = to_ai_message(response.message, usage=response.usage)
        if response.finish_reason is not None:
            message.response_metadata["finish_reason"] = response.finish_reason
        schema = kwargs.get("response_format")
        if isinstance(schema, type) and issubclass(schema, BaseModel) and not message.tool_calls:
            # ChatOpenAI hands a structured output over parsed, which the journal does not
            # keep: it is parsed again from the recorded text, live and on replay alike.
            with contextlib.suppress(ValidationError):
                text = message_text(message.content)
                message.additional_kwargs["parsed"] = schema.model_validate_json(text)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _request(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> ModelRequest:
        """The call as the journal hashes it: the messages, the bound tools and tool choice
        as neutral specs, and every other argument the model is called with as settings."""
        arguments = dict(kwargs)
        tool_choice = self.bound_tool_choice
        if self.bound_tools:
            # inner's own rendering of the tools and the choice described below
            arguments.pop("tools", None)
            arguments.pop("tool_choice", None)
            arguments = {**self.bound_options, **arguments}
        if tool_choice is not None and not isinstance(tool_choice, str):
            arguments["tool_choice"] = tool_choice
            tool_choice = None
        settings: dict[str, JsonValue] = {"stop": list(stop)} if stop else {}
        settings.update(_described(arguments))
        return ModelRequest(
            model=model_id(self.inner),
            messages=tuple(from_langchain(messages)),
            tools=tuple(self._specs()),
            tool_choice=tool_choice,
            settings=settings,
        )

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

    async def _ask_inner(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        stream: DeltaSink | None,
        kwargs: dict[str, Any],
    ) -> ModelResponse:
        # Nothing of the graph's run reaches the inner call: not through the config, nor
        # through the context in which LangChain hands a parent run's config (callbacks: the
        # guard, the graph's streams) to the runnables it calls.
        detached = var_child_runnable_config.set(None)
        answer: BaseMessage
        try:
            if stream is None:
                answer = await self.inner.ainvoke(messages, _QUIET, stop=stop, **kwargs)
            else:
                answer = await _streamed(self.inner, messages, stream, stop=stop, **kwargs)
        finally:
            var_child_runnable_config.reset(detached)
        if not isinstance(answer, AIMessage):
            raise TypeError(
                f"{model_id(self.inner)} answered {type(answer).__name__}, not AIMessage"
            )
        return response_from_ai(answer)


def _described(arguments: dict[str, Any]) -> dict[str, JsonValue]:
    """A model call's arguments as JSON; a schema class (a ``response_format``) as the
    function LangChain makes of it."""

    def schema_of(value: object) -> object:
        if isinstance(value, type):
            return convert_to_openai_function(value)
        raise TypeError(f"a {type(value).__name__} is not JSON")

    try:
        described: dict[str, JsonValue] = json.loads(json.dumps(arguments, default=schema_of))
    except (TypeError, ValueError) as exc:
        refuse(
            f"the model is called with arguments the journal cannot describe ({exc}, in "
            f"{sorted(arguments)}): its input hash covers every argument; bind JSON values"
        )
    return described


async def _streamed(
    runnable: Runnable[LanguageModelInput, BaseMessage],
    messages: list[BaseMessage],
    stream: DeltaSink,
    **kwargs: Any,
) -> BaseMessage:
    whole: AIMessageChunk | None = None
    # A chat model's astream is an async generator: closed here even when it stops early.
    streamed = cast(AsyncGenerator[BaseMessage, None], runnable.astream(messages, _QUIET, **kwargs))
    async with contextlib.aclosing(streamed) as chunks:
        async for chunk in chunks:
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
