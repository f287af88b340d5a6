"""Test doubles for judge-runner's tests.

``tests.support.fakes.fake_llm`` holds :class:`FakeLLMServer`, a loopback HTTP server
that speaks enough of the Anthropic Messages API and the OpenAI Chat
Completions API for the real ``anthropic`` and ``openai`` SDKs to talk to it.
"""

from .fake_llm import (
    LLAMA_CPP_PYTHON,
    DefaultBrain,
    FakeLLMServer,
    Fault,
    Quirks,
    RecordedRequest,
    Text,
    ToolCall,
    offered_tools,
    tool_results,
)

__all__ = [
    "DefaultBrain",
    "Fault",
    "LLAMA_CPP_PYTHON",
    "Quirks",
    "FakeLLMServer",
    "RecordedRequest",
    "Text",
    "ToolCall",
    "offered_tools",
    "tool_results",
]
