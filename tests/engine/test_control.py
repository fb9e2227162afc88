import json

import anyio
import pytest

from frobozz.engine import Allow, ControlError, ControlTimeoutError, Deny, Engine, Result
from frobozz.engine._control import ControlChannel
from frobozz.engine.testing import ScriptedModel
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio


class Wire:
    def __init__(self):
        self.lines = []
        self.written = anyio.Event()

    async def write(self, line):
        self.lines.append(json.loads(line))
        self.written.set()


async def test_requests_are_matched_to_answers_by_id_and_errors_raise():
    wire = Wire()
    channel = ControlChannel(wire.write, can_use_tool=None, timeout=5)
    async with anyio.create_task_group() as tg:

        async def answer_later():
            await wire.written.wait()
            sent = wire.lines[0]
            channel.on_response({"type": "control_response", "response": {"subtype": "success", "request_id": "other"}})
            channel.on_response(
                {
                    "type": "control_response",
                    "response": {"subtype": "success", "request_id": sent["request_id"], "response": {"ok": True}},
                }
            )

        tg.start_soon(answer_later)
        assert await channel.request("interrupt") == {"ok": True}
    wire.written = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def refuse():
            await wire.written.wait()
            channel.on_response(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "error",
                        "request_id": wire.lines[-1]["request_id"],
                        "error": "no such model",
                    },
                }
            )

        tg.start_soon(refuse)
        with pytest.raises(ControlError, match="no such model"):
            await channel.request("set_model", model="nope")


async def test_an_unanswered_request_times_out_with_a_clear_error():
    channel = ControlChannel(Wire().write, can_use_tool=None, timeout=5)
    with pytest.raises(ControlTimeoutError, match=r"did not answer 'interrupt' within 0\.1 s"):
        await channel.request("interrupt", timeout=0.1)


@pytest.mark.parametrize(
    "decision, expected",
    [
        (Allow(), {"behavior": "allow", "updatedInput": {"path": "/x"}}),
        (
            Allow(updated_input={"path": "/y"}, updated_permissions=[{"type": "setMode", "mode": "acceptEdits"}]),
            {
                "behavior": "allow",
                "updatedInput": {"path": "/y"},
                "updatedPermissions": [{"type": "setMode", "mode": "acceptEdits"}],
            },
        ),
        (Deny("no"), {"behavior": "deny", "message": "no"}),
        (Deny("stop", interrupt=True), {"behavior": "deny", "message": "stop", "interrupt": True}),
    ],
)
async def test_permission_answers_have_the_agent_sdks_shapes(decision, expected):
    wire = Wire()

    async def decide(name, tool_input, context):
        assert (name, context.tool_use_id) == ("Write", "t1")
        return decision

    channel = ControlChannel(wire.write, can_use_tool=decide, timeout=5)
    async with anyio.create_task_group() as tg:
        channel.on_request(
            {
                "type": "control_request",
                "request_id": "r9",
                "request": {
                    "subtype": "can_use_tool",
                    "tool_name": "Write",
                    "input": {"path": "/x"},
                    "tool_use_id": "t1",
                },
            },
            tg,
        )
    assert wire.lines == [
        {"type": "control_response", "response": {"subtype": "success", "request_id": "r9", "response": expected}}
    ]


async def test_a_request_nobody_can_answer_gets_an_error_reply_not_silence():
    wire = Wire()

    async def broken(name, tool_input, context):
        return "yes"  # not an Allow or a Deny

    for callback, message in ((None, "no permission callback"), (broken, "must return Allow or Deny")):
        wire.lines.clear()
        channel = ControlChannel(wire.write, can_use_tool=callback, timeout=5)
        async with anyio.create_task_group() as tg:
            channel.on_request(
                {
                    "type": "control_request",
                    "request_id": "r1",
                    "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}},
                },
                tg,
            )
        assert wire.lines[0]["response"]["subtype"] == "error" and message in wire.lines[0]["response"]["error"]


async def test_set_model_and_permission_mode_reach_the_real_cli(make_options):
    async with ScriptedModel(lambda r: f"model was {r.body['model']}") as model:
        async with Engine(make_options(model, model="claude-first-model")) as engine:
            await engine.start()
            await engine.send("one")
            first = await until(engine.events(), Result)
            await engine.set_model("claude-second-model")
            await engine.set_permission_mode("acceptEdits")
            await engine.send("two")
            second = await until(engine.events(), Result)
    assert first[-1].result == "model was claude-first-model"
    assert second[-1].result == "model was claude-second-model"
