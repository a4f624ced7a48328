"""A LangChain chat model on the real ``openai`` SDK (``langchain-openai`` is not a test
dependency): Chat Completions over HTTP to ``$OPENAI_BASE_URL``, the fake OpenAI server in
the tests, reporting the provider, model, response id and finish reason as ``ChatOpenAI``
does."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from openai import AsyncOpenAI
from pydantic import Field

__all__ = ("MODEL", "OpenAIChat")

MODEL = "gpt-4.1-mini"


class OpenAIChat(BaseChatModel):
    model_name: str = MODEL
    tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "openai-chat"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return LangSmithParams(ls_provider="openai", ls_model_name=self.model_name)

    def bind_tools(self, tools: Any, *, tool_choice: str | None = None, **kwargs: Any) -> Any:
        return self.model_copy(update={"tools": [convert_to_openai_tool(t) for t in tools]})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        async with AsyncOpenAI() as client:
            completion = await client.chat.completions.create(
                model=self.model_name,
                messages=convert_to_openai_messages(messages),  # type: ignore[arg-type]
                tools=self.tools,  # type: ignore[arg-type]
            )
        choice = completion.choices[0]
        calls = [
            {"name": c.function.name, "args": json.loads(c.function.arguments), "id": c.id}
            for c in choice.message.tool_calls or []
            if c.type == "function"
        ]
        message = AIMessage(
            content=choice.message.content or "",
            tool_calls=calls,
            response_metadata={
                "finish_reason": choice.finish_reason,
                "model_name": completion.model,
                "id": completion.id,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
