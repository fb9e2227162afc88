from frobozz.engine import (
    ApiRetry,
    AssistantMessage,
    CompactBoundary,
    Result,
    StreamEvent,
    SystemInit,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownEvent,
    UserMessage,
    parse_event,
)


def test_init_gives_session_model_tools_and_mcp_server_status():
    event = parse_event(
        {
            "type": "system",
            "subtype": "init",
            "session_id": "s1",
            "model": "m",
            "tools": ["Read"],
            "mcp_servers": [{"name": "game", "status": "connected"}],
            "permissionMode": "default",
            "claude_code_version": "2.1.197",
            "cwd": "/x",
        }
    )
    assert isinstance(event, SystemInit)
    assert (event.session_id, event.model, event.tools, event.version) == ("s1", "m", ("Read",), "2.1.197")
    assert event.mcp_servers[0].name == "game" and event.mcp_servers[0].status == "connected"
    assert event.raw["cwd"] == "/x" and event.is_replay is False


def test_assistant_blocks_are_typed_and_the_text_joined():
    event = parse_event(
        {
            "type": "assistant",
            "session_id": "s",
            "message": {
                "id": "m1",
                "model": "x",
                "content": [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "Go "},
                    {"type": "tool_use", "id": "t1", "name": "mcp__game__act", "input": {"command": "n"}},
                    {"type": "text", "text": "north"},
                ],
            },
        }
    )
    assert isinstance(event, AssistantMessage)
    assert event.text == "Go north"
    assert event.tool_uses == (ToolUseBlock(id="t1", name="mcp__game__act", input={"command": "n"}),)


def test_tool_results_replays_results_partials_retries_and_boundaries():
    user = parse_event(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": True}],
            },
        },
        is_replay=True,
    )
    assert isinstance(user, UserMessage) and user.is_replay
    assert user.tool_results == (ToolResultBlock(tool_use_id="t1", content="ok", is_error=True),)
    assert parse_event({"type": "user", "message": {"content": "hello"}}).content == (TextBlock(text="hello"),)
    result = parse_event(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "x",
            "session_id": "s",
            "total_cost_usd": 0.5,
            "usage": {"input_tokens": 3},
        }
    )
    assert isinstance(result, Result) and result.total_cost_usd == 0.5 and result.usage["input_tokens"] == 3
    partial = parse_event(
        {
            "type": "stream_event",
            "event": {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}},
        }
    )
    assert isinstance(partial, StreamEvent) and partial.text_delta == "Hi"
    retry = parse_event(
        {
            "type": "system",
            "subtype": "api_retry",
            "attempt": 2,
            "max_retries": 10,
            "retry_delay_ms": 500.0,
            "error_status": 529,
            "error": "overloaded",
        }
    )
    assert isinstance(retry, ApiRetry) and retry.status == 529
    boundary = parse_event(
        {"type": "system", "subtype": "compact_boundary", "compact_metadata": {"trigger": "auto", "pre_tokens": 150000}}
    )
    assert isinstance(boundary, CompactBoundary) and boundary.pre_tokens == 150000


def test_unknown_and_malformed_objects_become_events_not_crashes():
    assert isinstance(parse_event({"type": "something_new", "x": 1}), UnknownEvent)
    assert isinstance(parse_event({}), UnknownEvent)
    odd = parse_event({"type": "assistant", "message": {"content": [None, 5, {"type": "text"}]}})
    assert isinstance(odd, AssistantMessage) and odd.text == ""
