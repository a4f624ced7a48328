"""Models: the protocol the journal calls, keyless deterministic models, a real provider
from ``TETHER_MODEL`` (:func:`model_from_env`, through ``tether.models.pydantic_ai``), and the
policy that bounds and retries every model call (:class:`ModelCallPolicy`).

Example::

    from tether.models import EchoModel, Rule, ScriptedModel, ToolUse, model_from_env

    model = ScriptedModel([Rule("time", ToolUse("clock"))], default="Hello!")
    chosen = model_from_env(EchoModel(), default_name="echo")  # TETHER_MODEL=openai:gpt-4.1-mini
"""

from tether.models._echo import EchoModel
from tether.models._env import (
    ModelChoice,
    ModelConfigError,
    check_model_env,
    model_from_env,
    model_timeout_from_env,
)
from tether.models._prices import cost_of
from tether.models._protocol import DeltaSink, Model, StreamDelta
from tether.models._retry import (
    DEFAULT_MODEL_TIMEOUT,
    ModelCallPolicy,
    ModelRetryPolicy,
    RetryClock,
)
from tether.models._scripted import (
    Delay,
    Failure,
    Reply,
    Rule,
    ScriptedModel,
    Text,
    Thinking,
    ToolUse,
    estimate_tokens,
)

__all__ = (
    "DEFAULT_MODEL_TIMEOUT",
    "Delay",
    "DeltaSink",
    "EchoModel",
    "Failure",
    "Model",
    "ModelCallPolicy",
    "ModelChoice",
    "ModelConfigError",
    "ModelRetryPolicy",
    "Reply",
    "RetryClock",
    "Rule",
    "ScriptedModel",
    "StreamDelta",
    "Text",
    "Thinking",
    "ToolUse",
    "check_model_env",
    "cost_of",
    "estimate_tokens",
    "model_from_env",
    "model_timeout_from_env",
)
