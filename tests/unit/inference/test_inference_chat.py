"""Chat rendering (Hermes tools for templates without tool support) and tool-call parsing."""

import json

import pytest

from looprl.inference.chat import ChatFormatError, parse_tool_calls, render_prompt, supports_tools
from looprl.inference.protocol import ChatMessage, Tool

ADD = Tool.model_validate({"type": "function",
                           "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}}})


def test_parse_single_call_with_surrounding_text():
    content, calls = parse_tool_calls(
        'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>')
    assert content == "Let me add."
    assert [c.function.name for c in calls] == ["add"]
    assert json.loads(calls[0].function.arguments) == {"a": 1, "b": 2}
    assert calls[0].id.startswith("call_") and calls[0].type == "function"


def test_parse_several_calls_and_missing_arguments():
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b"}</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content is None
    assert [(c.function.name, c.function.arguments) for c in calls] == [("a", "{}"), ("b", "{}")]


@pytest.mark.parametrize(
    "text",
    [
        "no calls here",
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "a", "arguments": [1]}</tool_call>',
        '<tool_call>["a"]</tool_call>',
        '<tool_call>{"name": "a"}</tool_call> then <tool_call>{"name": "b"',
        '<tool_call>{"name": "a"',
    ],
)
def test_malformed_or_absent_calls_stay_content(text):
    assert parse_tool_calls(text) == (text, [])


class Recorder:
    """A tokenizer stand-in that records what the template received."""

    chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=True):
        self.messages, self.tools = messages, tools
        return "rendered"

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [len(text)]}


def msgs(*items):
    return [ChatMessage.model_validate(m) for m in items]


def test_hermes_rendering_without_native_tool_support():
    tok = Recorder()
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    render_prompt(tok, msgs(
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "add "}, {"type": "text", "text": "1"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
    ), [ADD])
    system, user, assistant, results = tok.messages
    assert system["role"] == "system" and system["content"].startswith("Be brief.\n\n# Tools")
    assert '"name": "add"' in system["content"] and "<tool_call>" in system["content"]
    assert user == {"role": "user", "content": "add 1"}
    assert assistant["content"] == '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'
    assert results == {"role": "user",
                       "content": "<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response>"}
    assert tok.tools is None


def test_native_tool_templates_get_tools_directly():
    tok = Recorder()
    tok.chat_template = "{% if tools %}{{ tools }}{% endif %}"
    assert supports_tools(tok.chat_template) and not supports_tools(None)
    render_prompt(tok, msgs({"role": "user", "content": "hi"}), [ADD])
    assert tok.tools == [ADD.model_dump(exclude_none=True)]
    assert tok.messages == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": "{bad"}}]},
        {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]},
    ],
)
def test_unrenderable_messages_raise_chat_format_error(message):
    with pytest.raises(ChatFormatError):
        render_prompt(Recorder(), msgs(message), None)
