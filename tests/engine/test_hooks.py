"""Hooks through the real claude CLI against a scripted Messages API: a denial the model reads, an input
rewritten before the tool runs, context added to a prompt, matchers, PreCompact and SessionStart on
/compact, PostToolUse and Stop, and hooks that fail or hang answered for them without a hung turn."""

import anyio
import pytest

from frobozz.engine import Engine, HookInput, HookMatcher, HookOutput, Result, UserMessage
from frobozz.engine._hooks import HookRegistry
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse, replies
from tests.engine.conftest import of, until

pytestmark = pytest.mark.anyio


async def turn(make_options, script, hooks, *prompts, **options):
    """Play `prompts` through claude with `hooks`; the model's requests and the events of the last turn."""
    async with ScriptedModel(script) as model:
        async with Engine(make_options(model, hooks=hooks, **options)) as engine:
            await engine.start()
            for prompt in prompts:
                await engine.send(prompt)
                events = await until(engine.events(), Result)
    return model.requests, events


def writes(path, content="hi"):
    return replies(Reply((ToolUse("Write", {"file_path": str(path), "content": content}, id="toolu_w1"),)), "done")


async def test_a_pre_tool_use_hook_denies_the_call_and_the_model_reads_why(make_options, claude_home):
    asked: list[HookInput] = []

    async def guard(event: HookInput) -> HookOutput:
        asked.append(event)
        return HookOutput(permission="deny", reason="no writing in the museum")

    target = claude_home / "x.txt"
    requests, events = await turn(
        make_options,
        writes(target),
        {"PreToolUse": [HookMatcher([guard], "Write")]},
        "write a file",
        permission_mode="acceptEdits",
    )
    assert [(e.event, e.tool_name, dict(e.tool_input), e.tool_use_id) for e in asked] == [
        ("PreToolUse", "Write", {"file_path": str(target), "content": "hi"}, "toolu_w1")
    ]
    assert not target.exists()
    assert "no writing in the museum" in str(requests[1].tool_results()[0]["content"])
    assert of(events, UserMessage)[0].tool_results[0].is_error


async def test_a_rewrite_changes_the_input_the_tool_gets(make_options, claude_home):
    async def rewrite(event: HookInput) -> HookOutput:
        return HookOutput(updated_input={**event.tool_input, "content": "rewritten by the hook"})

    target = claude_home / "y.txt"
    await turn(make_options, writes(target, "original"), {"PreToolUse": [HookMatcher([rewrite])]}, "write")
    assert target.read_text() == "rewritten by the hook"  # and no permission prompt: the hook allowed it


async def test_user_prompt_submit_context_reaches_the_models_request_and_matchers_pick_tools(make_options, claude_home):
    called = []

    async def context(event: HookInput) -> HookOutput:
        called.append(("prompt", event.prompt))
        return HookOutput(context="The magic word is xyzzy.")

    async def only_reads(event: HookInput) -> None:
        called.append(("read", event.tool_name))

    requests, _ = await turn(
        make_options,
        writes(claude_home / "z.txt"),
        {"UserPromptSubmit": [HookMatcher([context])], "PreToolUse": [HookMatcher([only_reads], "Read|Glob")]},
        "what is the word?",
        permission_mode="acceptEdits",
    )
    assert "The magic word is xyzzy." in str(requests[0].body["messages"])
    assert called == [("prompt", "what is the word?")]  # the Write did not match Read|Glob


async def test_post_tool_use_and_stop_fire_in_order_and_compact_fires_pre_compact_then_session_start(
    make_options, claude_home
):
    seen = []

    async def note(event: HookInput) -> None:
        seen.append((event.event, event.tool_name or event.trigger))

    hooks = {name: [HookMatcher([note])] for name in ("PostToolUse", "Stop", "PreCompact", "SessionStart")}
    script = replies(
        Reply((ToolUse("Write", {"file_path": str(claude_home / "w.txt"), "content": "x"}),)),
        "done",
        "summary of the conversation",
        "after",
    )
    await turn(make_options, script, hooks, "write", "/compact", permission_mode="acceptEdits")
    assert seen[:2] == [("PostToolUse", "Write"), ("Stop", None)]
    assert ("PreCompact", "manual") in seen and ("SessionStart", "compact") in seen
    assert seen.index(("PreCompact", "manual")) < seen.index(("SessionStart", "compact"))


@pytest.mark.parametrize("failure", ["raises", "hangs", "returns junk"])
async def test_a_hook_that_fails_is_answered_for_it_the_tool_is_denied_and_the_turn_ends(
    make_options, claude_home, failure, caplog
):
    async def broken(event: HookInput):
        if failure == "raises":
            raise RuntimeError("the guard's database is down")
        if failure == "hangs":
            await anyio.sleep(3600)
        return {"permissionDecision": "allow"}

    target = claude_home / "f.txt"
    with anyio.fail_after(120):
        requests, events = await turn(
            make_options,
            writes(target),
            {"PreToolUse": [HookMatcher([broken], timeout=1.0)]},
            "write",
            permission_mode="acceptEdits",
        )
    told = str(requests[1].tool_results()[0]["content"])
    assert "the broken hook" in told and not target.exists()  # a guard that fails keeps the tool out
    assert of(events, Result) and "hook broken" in caplog.text


async def test_a_failing_hook_for_another_event_lets_the_turn_go_on_with_a_message():
    async def broken(event: HookInput):
        raise ValueError("oops")

    registry = HookRegistry({"UserPromptSubmit": [HookMatcher([broken])]})
    [entry] = registry.config()["UserPromptSubmit"]
    answer = await registry.answer(
        {"callback_id": entry["hookCallbackIds"][0], "input": {"hook_event_name": "UserPromptSubmit", "prompt": "hi"}}
    )
    assert answer == {"systemMessage": "the broken hook failed: ValueError: oops"}
    with pytest.raises(LookupError, match="no hook"):
        await registry.answer({"callback_id": "hook_99", "input": {}})
    assert HookRegistry({}).config() is None
