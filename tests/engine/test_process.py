"""The transport's edges, with the fake CLI (the real one cannot be made to print these)."""

import pytest

from frobozz.engine import (
    AssistantMessage,
    Engine,
    EngineOptions,
    EngineSettings,
    EngineState,
    ErrorEvent,
    ProcessExit,
    Restarted,
    Result,
    SessionClosedError,
)
from frobozz.engine.testing import fake_cli_path
from tests.engine.conftest import of, until

pytestmark = pytest.mark.anyio


def _options(tmp_path, **kw):
    return EngineOptions(cli_path=fake_cli_path(), cwd=tmp_path, proxy=False, env={"HOME": str(tmp_path)}, **kw)


async def test_non_json_and_oversized_lines_become_error_events_between_good_ones(tmp_path):
    async with Engine(_options(tmp_path), EngineSettings(max_line_bytes=4096)) as engine:
        await engine.start()
        events = []
        for text in ("garbage", "huge 100000", "echo still fine"):
            await engine.send(text)
            events += await until(engine.events(), Result)
    errors = of(events, ErrorEvent)
    assert "not a JSON object" in errors[0].message and "this is not json" in errors[0].message
    assert "longer than 4096 bytes was dropped" in errors[1].message
    assert of(events, AssistantMessage)[-1].text == "still fine"


async def test_a_cli_that_keeps_dying_is_given_up_on_with_a_clear_error(tmp_path):
    async with Engine(_options(tmp_path, max_restarts=2)) as engine:
        await engine.start()
        events = []
        for _ in range(3):
            await engine.send("die")
            events += await until(engine.events(), ProcessExit)
            if engine.state is not EngineState.FAILED:
                events += await until(engine.events(), Restarted)
        events += [e async for e in engine.events()]
        assert engine.state is EngineState.FAILED
        with pytest.raises(SessionClosedError):
            await engine.send("anyone?")
    exits = of(events, ProcessExit)
    assert [e.exit_code for e in exits] == [3, 3, 3] and not any(e.expected for e in exits)
    assert [r.attempt for r in of(events, Restarted)] == [1, 2]
    given_up = of(events, ErrorEvent)[-1].message
    assert "was not restarted (2 of 2 restarts used) (its stderr ends: " in given_up
    assert given_up.endswith("fake claude: dying as asked)")
