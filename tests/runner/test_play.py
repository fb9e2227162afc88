"""End to end: the runner drives the real claude CLI; a scripted model on 127.0.0.1 plays."""

import itertools
import json
import os
import threading

import anyio
import pytest

from frobozz._tasks import both
from frobozz.engine import text_of
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from frobozz.games import GameLibrary, walkthrough_for
from frobozz.runner import (
    PlayerError,
    RunConfig,
    RunFinishedError,
    RunStore,
    _report,
    play,
    serve_in_process,
)
from frobozz.runner._context import RunContext
from frobozz.runner._game_producers import FAILING_ROUNDS_LIMIT
from frobozz.runner._players import text_handler, tool_handler
from frobozz.runner._prompts import PAUSED, turn_in
from tests.orphans import claudes_below

pytestmark = pytest.mark.anyio


def _turns(settings, run_id):
    return RunStore.open(settings.runs_dir, run_id).turns()


async def test_both_modes_win_zork1_with_the_walkthrough_and_record_the_same_turns(runner_settings):
    """Eight commands a reply (--multi; claude makes a message's eight acts one after another): the same 396
    turns in 50 of claude's, a third of the CPU (one command a reply is played for 45-80 turns in the queue's
    test of a killed worker, and in every test of a few turns)."""
    text, tools = await both(
        lambda: play(RunConfig(game="zork1", player="walkthrough", mode="text", multi=True), runner_settings),
        lambda: play(RunConfig(game="zork1", player="walkthrough", mode="tools", multi=True), runner_settings),
    )
    for result in (text, tools):
        assert (result.score, result.max_score, result.won, result.reason, result.turns) == (350, 350, True, "won", 396)

    def same(r):
        return (r.turn, r.command, r.score, r.moves, r.location, r.text)

    assert [same(r) for r in _turns(runner_settings, text.run_id)] == [
        same(r) for r in _turns(runner_settings, tools.run_id)
    ]
    run_dir = runner_settings.runs_dir / text.run_id
    transcript = (run_dir / "transcript.md").read_text()
    assert (
        transcript.startswith("# Zork I: The Great Underground Empire: run ")
        and "| player | walkthrough |" in transcript
    )
    assert "## Turn 396: `" in transcript and "| reason | won |" in transcript
    for image in ("score.png", "map.png"):
        assert (run_dir / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Stone Barrow" in (run_dir / "map.dot").read_text()
    records = _turns(runner_settings, text.run_id)
    assert records[0].reply == records[7].reply != records[8].reply and records[0].reply.count("<command>") == 8


async def test_every_reply_style_of_the_scripted_player_is_understood(runner_settings):
    """Tag, '>' line, COMMAND:, prose: one command a reply, in each of the styles it rotates through."""
    result = await play(RunConfig(game="zork1", player="walkthrough", max_turns=4), runner_settings)
    replies = [r.reply for r in _turns(runner_settings, result.run_id)]
    assert ["<command>" in replies[0], "\n> " in replies[1], "COMMAND:" in replies[2], "plan" in replies[3]] == [
        True
    ] * 4


async def test_a_runs_pictures_are_drawn_off_the_event_loop(runner_settings, monkeypatch):
    """Seconds of CPU for a long run: on the loop, a worker's other runs and its queue's heartbeat stood still."""
    drawn_on = []
    finish = _report.finish

    def recorded(*args, **kwargs):
        drawn_on.append(threading.current_thread() is threading.main_thread())
        finish(*args, **kwargs)

    monkeypatch.setattr(_report, "finish", recorded)
    result = await play(RunConfig(game="zork1", player="walkthrough", max_turns=2), runner_settings)
    assert drawn_on == [False] and (runner_settings.runs_dir / result.run_id / "map.png").is_file()


async def test_a_reply_without_a_command_gets_a_correction_and_play_goes_on(runner_settings):
    seen = []

    def handler(request):
        seen.append(request.last_user_text())
        if len(seen) == 1:
            return "Hmm, this is a lovely white house. I wonder who lives in it?"
        return f"<command>{['n', 'e', 'open window'][turn_in(request.last_user_text()) % 3]}</command>"

    result = await play(RunConfig(game="zork1", player="walkthrough", max_turns=3), runner_settings, handler=handler)
    assert "could not find a command" in seen[1]
    assert (result.turns, result.reason) == (3, "max turns")
    assert RunStore.open(runner_settings.runs_dir, result.run_id).info.corrections == 1


async def test_a_player_that_never_gives_a_command_is_stopped_not_left_stalling(runner_settings):
    result = await play(RunConfig(game="zork1", player="walkthrough"), runner_settings, handler=lambda r: "I wonder.")
    assert (result.turns, result.reason) == (0, "no command in replies")


async def test_meta_commands_become_runner_actions_or_are_refused(runner_settings):
    script = ["n", "save", "quit", "e", "restore", "look"]
    seen = []

    def handler(request):
        seen.append(request.last_user_text())
        return f"<command>{script[len(seen) - 1]}</command>" if len(seen) <= len(script) else "done"

    result = await play(RunConfig(game="zork1", player="walkthrough", max_turns=5), runner_settings, handler=handler)
    turns = _turns(runner_settings, result.run_id)
    assert [t.command for t in turns] == ["n", "save", "e", "restore", "look"]
    assert "Saved to slot 'quicksave'" in turns[1].text
    assert "'quit' is not sent to the game" in seen[3]
    assert turns[3].location == "North of House" and turns[4].location == "North of House"


async def test_a_death_ends_the_run_and_is_reported_as_such(runner_settings, tmp_path):
    script = tmp_path / "grue.txt"
    script.write_text("# into the dark without a lamp\nn\ne\nopen window\nw\nw\nmove rug\nopen trap door\nd\nn\nn\n")
    result = await play(RunConfig(game="zork1", player=f"script:{script}"), runner_settings)
    assert (result.reason, result.turns) == ("died", 9)
    assert "You have died" in _turns(runner_settings, result.run_id)[-1].text


async def test_a_script_that_runs_out_before_the_game_ends_ends_the_run_as_such(runner_settings, tmp_path):
    """Not with a player asked for commands it does not have until the corrections run out. (Saved by an editor
    that starts the file with a byte-order mark, which is no part of its first line.)"""
    script = tmp_path / "walk.txt"
    script.write_text("\ufeff# a short walk\nn\ne\nopen window\n", encoding="utf-8")
    result = await play(RunConfig(game="zork1", player=f"script:{script}"), runner_settings)
    assert (result.reason, result.turns) == ("script ended", 3)
    assert RunStore.open(runner_settings.runs_dir, result.run_id).info.corrections == 0


@pytest.mark.parametrize(
    "line, said",
    [
        (b"quit", r"line 4: 'quit' is not sent to the game; remove the line"),
        (b"  Script transcript.txt", r"line 4: 'script' is not sent"),
        (b"x" * 300, r"line 4: command is 300 characters long"),
        ("go café".encode(), r"line 4: command contains non-ASCII"),
        (b"go \xff", r"is not UTF-8 text \(invalid start byte at byte 15\)"),
    ],
    ids=["quit", "script", "huge", "non-ascii", "not utf-8"],
)
async def test_a_script_with_a_line_the_game_never_takes_is_refused_before_play_naming_the_line(
    runner_settings, tmp_path, line, said
):
    """The scripted player gave such a line again and again, a turn never made (until --max-time), or with
    --multi played the next line twice."""
    script = tmp_path / "moves.txt"
    script.write_bytes(b"# a walk\nn\n\n" + line + b"\ns\n")
    with pytest.raises(PlayerError, match=r"the script .*moves\.txt,? " + said):
        await play(RunConfig(game="zork1", player=f"script:{script}"), runner_settings)
    assert not runner_settings.runs_dir.exists() or not list(runner_settings.runs_dir.iterdir())  # no run made


async def test_budgets_of_turns_cost_and_time_stop_the_run(runner_settings, monkeypatch, tmp_path):
    by_turns = await play(RunConfig(game="zork1", player="walkthrough", max_turns=4), runner_settings)
    assert (by_turns.reason, by_turns.turns) == ("max turns", 4)
    free = await play(RunConfig(game="zork1", player="walkthrough", max_turns=12, max_cost=0.0035), runner_settings)
    assert (free.cost_usd, free.reason) == (0.0, "max turns")  # the scripted model costs nothing
    story = GameLibrary(runner_settings).find("zork1")
    async with ScriptedModel(text_handler(walkthrough_for(story.md5))) as api:  # claude, priced as a paid model
        for name, value in {**api.env(), "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "c")}.items():
            monkeypatch.setenv(name, value)
        by_cost = await play(RunConfig(game="zork1", player="claude", max_cost=0.0035), runner_settings)
    assert by_cost.reason == "max cost" and by_cost.cost_usd >= 0.0035 and by_cost.turns < 10
    slow = Reply((Text("<command>wait</command>"),), delay=0.3)
    by_time = await play(
        RunConfig(game="zork1", player="walkthrough", max_seconds=3), runner_settings, handler=lambda r: slow
    )
    assert by_time.reason == "time limit" and by_time.turns < 10


async def test_a_resumed_run_adds_only_its_new_turns_cost(runner_settings, monkeypatch, tmp_path):
    """claude carries a resumed session's cost total on: the run counts what each new turn added, not that again."""
    story = GameLibrary(runner_settings).find("zork1")
    async with ScriptedModel(text_handler(walkthrough_for(story.md5))) as api:  # claude, priced as a paid model
        for name, value in {**api.env(), "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "c")}.items():
            monkeypatch.setenv(name, value)
        first = await play(RunConfig(game="zork1", player="claude", max_turns=2), runner_settings)
        again = await play(RunConfig(resume=first.run_id, max_turns=4), runner_settings)
    assert first.cost_usd > 0 and again.turns == 4
    assert again.cost_usd == pytest.approx(2 * first.cost_usd)  # like turns cost alike


async def test_a_finished_run_cannot_be_replayed_by_resume(runner_settings):
    first = await play(RunConfig(game="zork1", player="walkthrough", max_turns=2), runner_settings)
    with pytest.raises(RunFinishedError, match=r"is finished \(max turns, 2 of 2 turns\).*--max-turns"):
        await play(RunConfig(resume=first.run_id), runner_settings)  # no turn 3 without a raised budget
    assert [t.turn for t in _turns(runner_settings, first.run_id)] == [1, 2]
    again = await play(RunConfig(resume=first.run_id, max_turns=3), runner_settings)
    assert (again.run_id, again.turns, again.reason) == (first.run_id, 3, "max turns")  # a raised budget goes on
    turns = _turns(runner_settings, first.run_id)
    assert [t.turn for t in turns] == [1, 2, 3] and [t.command for t in turns] == ["N", "N", "U"]
    assert json.loads((runner_settings.runs_dir / first.run_id / "run.json").read_text())["turns"] == 3
    transcript = (runner_settings.runs_dir / first.run_id / "transcript.md").read_text()
    assert transcript.count("## Summary") == 1 and transcript.index("## Turn 3:") < transcript.index("## Summary")
    resumed = transcript.index("## Resumed after turn 2")  # where the resumed run went on, said where it did
    assert transcript.index("## Turn 2:") < resumed < transcript.index("## Turn 3:")
    assert "max turns" in transcript[resumed : transcript.index("## Turn 3:")]


async def test_a_tools_mode_run_whose_game_server_cannot_start_fails_saying_so(runner_settings, monkeypatch):
    monkeypatch.setenv("FROBOZZ_MAX_SESSIONS", "lots")  # the game server (claude's child) refuses its settings
    result = await play(RunConfig(game="zork1", player="walkthrough", mode="tools", max_turns=3), runner_settings)
    info = json.loads((runner_settings.runs_dir / result.run_id / "run.json").read_text())
    assert info["status"] == "failed" and result.turns == 0
    assert result.reason.startswith("the game server did not start") and "game: failed" in result.reason


async def test_a_tools_mode_run_serves_the_game_in_its_own_process_and_plays_the_same_turns(runner_settings):
    """No `frobozz serve game` process is started for claude (a Python process to start before claude is ready):
    the run serves the game server itself, with the settings the stdio one was given (its autosave), and plays
    the very turns the stdio game server played (the runner's default, without the servers' factory)."""
    from frobozz.servers import load_server
    from tests.orphans import descendants_seen

    config = RunConfig(game="zork1", player="walkthrough", mode="tools", max_turns=12)
    serve_in_process(None)
    try:
        stdio = await play(config, runner_settings)
    finally:
        serve_in_process(load_server)
    async with descendants_seen() as seen:  # the command lines of every process below this one, while it plays
        own = await play(config, runner_settings)
    for result in (stdio, own):
        assert (result.turns, result.reason) == (12, "max turns")
    serving = [line for line in seen if "serve" in line and "game" in line]
    assert not serving, serving
    claudes = [line for line in seen if line and os.path.basename(line[0]) == "claude"]
    configs = [json.loads(line[i + 1]) for line in claudes for i, a in enumerate(line) if a == "--mcp-config"]
    assert claudes and [c["mcpServers"] for c in configs] == [{"game": {"type": "sdk", "name": "game"}}]

    def same(r):
        return (r.turn, r.command, r.score, r.moves, r.location, r.text)

    assert [same(r) for r in _turns(runner_settings, own.run_id)] == [
        same(r) for r in _turns(runner_settings, stdio.run_id)
    ]
    info = RunStore.open(runner_settings.runs_dir, own.run_id).info  # the server saved the game in the run's slot
    assert info.autosave_slot and info.autosave_slot in GameLibrary(runner_settings).save_slots("zork1")


async def test_a_tools_mode_player_that_keeps_calling_a_game_that_is_gone_is_stopped(runner_settings):
    calls = []

    def handler(request):  # a game started, then moves sent to a session that does not exist, again and again
        calls.append([text_of(r.get("content")) for r in request.tool_results()])
        if len(calls) == 1:
            return Reply((ToolUse("mcp__game__new_game", {"game": "zork1"}),))
        if len(calls) == 2:  # three at once: one round, one mistake
            return Reply(tuple(ToolUse("mcp__game__act", {"session_id": "gone", "command": c}) for c in "nse"))
        return Reply((ToolUse("mcp__game__act", {"session_id": "gone", "command": "n"}),))

    config = RunConfig(game="zork1", player="walkthrough", mode="tools", max_turns=5, max_seconds=90)
    result = await play(config, runner_settings, handler=handler)
    info = json.loads((runner_settings.runs_dir / result.run_id / "run.json").read_text())
    assert info["status"] == "failed" and result.turns == 0
    assert result.reason.startswith(f"the game tools failed {FAILING_ROUNDS_LIMIT} times in a row; the last: ")
    assert "gone" in result.reason  # the game server's own words: no such session
    assert FAILING_ROUNDS_LIMIT + 1 <= len(calls) <= FAILING_ROUNDS_LIMIT + 3  # not played on to the time limit
    # rounds, not calls, were counted: the run ended at the LIMIT-th round the game's own error came back in (the
    # model reads the last one only if claude asks it again before the interrupt: LIMIT - 1 or LIMIT). Counting the
    # three calls of one message as three mistakes ended it at round LIMIT - 2: LIMIT - 3 or LIMIT - 2. Moves claude
    # tried after the end were refused (PAUSED), not played, and are not counted here.
    failed = [results for results in calls if any("gone" in r and not r.startswith(PAUSED) for r in results)]
    assert FAILING_ROUNDS_LIMIT - 1 <= len(failed) <= FAILING_ROUNDS_LIMIT and len(failed[0]) == 3


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_a_run_whose_claude_dies_for_good_fails_saying_so_in_either_mode(runner_settings, mode):
    """claude killed at every model request from the third on: started again on its session until its restarts
    run out, then the run ends as failed (in tools mode it waited for ever: no turn would end)."""
    commands = walkthrough_for(GameLibrary(runner_settings).find("zork1").md5)
    scripted = tool_handler(commands, "zork1") if mode == "tools" else text_handler(commands)
    requests = []

    def handler(request):
        requests.append(request)
        if len(requests) >= 3:
            for claude in claudes_below(os.getpid()):
                claude.kill()
        return scripted(request)

    with anyio.fail_after(120):
        result = await play(
            RunConfig(game="zork1", player="walkthrough", mode=mode, max_turns=40), runner_settings, handler=handler
        )
    info = json.loads((runner_settings.runs_dir / result.run_id / "run.json").read_text())
    assert info["status"] == "failed" and result.reason.startswith("claude failed: claude exited")
    assert "not restarted" in result.reason and result.turns < 40


async def test_a_tools_mode_run_resumes_from_the_game_servers_autosave(runner_settings, monkeypatch):
    committed = RunContext.committed

    async def slowly(self: RunContext) -> None:  # a busy database: claude, mid-turn, goes on meanwhile
        await anyio.sleep(2)  # (a delay put in, not a wait for something)
        await committed(self)

    with monkeypatch.context() as patched:
        patched.setattr(RunContext, "committed", slowly)
        first = await play(RunConfig(game="zork1", player="walkthrough", mode="tools", max_turns=6), runner_settings)
    assert (first.turns, first.reason) == (6, "max turns")
    await _resumed_as_if_never_stopped(runner_settings, first.run_id, 12)


async def _resumed_as_if_never_stopped(runner_settings, run_id: str, turns: int) -> None:
    """The run, resumed up to `turns`, has the records of a text run played straight: the game went on where
    it stopped."""
    resumed = await play(RunConfig(resume=run_id, max_turns=turns), runner_settings)
    assert (resumed.run_id, resumed.turns, resumed.reason) == (run_id, turns, "max turns")
    straight = await play(RunConfig(game="zork1", player="walkthrough", mode="text", max_turns=turns), runner_settings)

    def same(r):
        return (r.turn, r.command, r.score, r.moves, r.location)

    assert [same(r) for r in _turns(runner_settings, run_id)] == [
        same(r) for r in _turns(runner_settings, straight.run_id)
    ]


async def test_the_map_starts_where_the_game_does(runner_settings):
    result = await play(RunConfig(game="zork1", player="walkthrough", max_turns=2), runner_settings)
    run_dir = runner_settings.runs_dir / result.run_id
    dot, mermaid = (run_dir / "map.dot").read_text(), (run_dir / "map.mmd").read_text()
    assert "West of House" in dot and "West of House" in mermaid  # the room before the first command
    assert RunStore.open(runner_settings.runs_dir, result.run_id).info.start_location == "West of House"


async def test_a_run_that_ends_with_the_reply_of_several_commands_plays_none_of_them(
    runner_settings, monkeypatch, tmp_path
):
    """The cost limit is reached on the reply that carries the next eight commands (--multi): none of them is
    played. They were, all eight, after the run had ended; a queued run's database never had them."""
    story = GameLibrary(runner_settings).find("zork1")
    async with ScriptedModel(text_handler(walkthrough_for(story.md5), several=8)) as api:  # priced as a paid model
        for name, value in {**api.env(), "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "c")}.items():
            monkeypatch.setenv(name, value)
        by_cost = await play(RunConfig(game="zork1", player="claude", max_cost=0.0035, multi=True), runner_settings)
    replies = [r for r in api.requests if r.body.get("stream")]
    assert by_cost.reason == "max cost" and len(replies) > 1
    assert by_cost.turns == 8 * (len(replies) - 1)  # each reply's eight, but the last one's


async def test_a_tools_mode_run_of_several_acts_a_message_stops_within_one_and_resumes_where_it_stopped(
    runner_settings,
):
    """Eight acts a message (--multi): the limit comes at the fifth act of the second message, and the resumed
    run goes on from there as a run of one command a reply does."""
    first = await play(
        RunConfig(game="zork1", player="walkthrough", mode="tools", max_turns=13, multi=True), runner_settings
    )
    assert (first.turns, first.reason) == (13, "max turns")
    await _resumed_as_if_never_stopped(runner_settings, first.run_id, 20)


async def test_a_resumed_run_whose_claude_crashes_and_is_restarted_costs_each_turn_what_the_model_billed(
    runner_settings, monkeypatch, tmp_path
):
    """A run stopped at 3 turns leaves claude's total saved (a graceful exit); resumed, its claude is killed while the
    sixth turn is asked and started again on its session, from that saved total (the resumed stretch's was saved
    nowhere). Counted from the run's own total, the sixth turn was billed as the first three over again."""
    commands = walkthrough_for(GameLibrary(runner_settings).find("zork1").md5)
    scripted = text_handler(commands)
    killed = []

    def crashing(request):
        if turn_in(request.last_user_text()) == 6 and not killed:
            killed.extend(claudes_below(os.getpid()))
            for claude in killed:
                claude.kill()
        return scripted(request)

    async with ScriptedModel(crashing) as api:  # claude, priced as a paid model
        for name, value in {**api.env(), "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "c")}.items():
            monkeypatch.setenv(name, value)
        with anyio.fail_after(180):
            first = await play(RunConfig(game="zork1", player="claude", max_turns=3), runner_settings)
            resumed = await play(RunConfig(resume=first.run_id, max_turns=8), runner_settings)
    assert killed and (resumed.turns, resumed.reason) == (8, "max turns")
    totals = [0.0] + [t.cost_usd for t in _turns(runner_settings, first.run_id)]
    each = [round(after - before, 6) for before, after in itertools.pairwise(totals)]
    assert each[0] > 0 and each == [each[0]] * 8, each
    info = json.loads((runner_settings.runs_dir / first.run_id / "run.json").read_text())
    assert round(info["cost_usd"], 6) == round(8 * each[0], 6)


async def test_a_game_with_no_known_walkthrough_refuses_the_walkthrough_player_and_makes_no_run(runner_settings):
    """It made a run first and then refused: `runs` listed it, 0 turns, "stopped: killed" (its run.json
    said running)."""
    from tests.conftest import ZORK1_R119

    with pytest.raises(PlayerError, match=r"zork1-r119\.z3 has no known walkthrough"):
        await play(RunConfig(game=str(ZORK1_R119), player="walkthrough", max_turns=5), runner_settings)
    assert not runner_settings.runs_dir.exists() or not list(runner_settings.runs_dir.iterdir())  # no run made


async def test_a_new_run_that_an_error_ends_before_its_first_turn_is_failed_with_the_error_not_left_running(
    runner_settings, monkeypatch
):
    """An error after a run's files were made (here its session's parts) left it "running", listed as killed."""
    from frobozz.runner import _run

    async def broken(*args, **kwargs):
        raise OSError("no room for claude here")

    monkeypatch.setattr(_run, "session_parts", broken)
    with pytest.raises(OSError, match="no room for claude"):
        await play(RunConfig(game="zork1", player="walkthrough", max_turns=5), runner_settings)
    (made,) = runner_settings.runs_dir.iterdir()
    store = RunStore.open(runner_settings.runs_dir, made.name)
    assert (store.info.status, store.info.reason) == ("failed", "it could not be played: no room for claude here")
    assert store.info.ended is not None and store.as_it_stands() == store.info  # not seen as killed either


@pytest.mark.parametrize("where", ["story", "claude"])
async def test_a_new_run_that_fails_at_its_start_is_failed_in_the_database_too_with_its_end_and_reason(
    runner_settings, ledger, monkeypatch, where
):
    """Its run.json said failed, its database row "running" for good (`runs --status running` listed it, and every
    other machine saw it running): a story file that cannot be opened, or claude that cannot start."""
    from frobozz.games import GameError
    from frobozz.runner import _run, all_runs

    async def no_claude(*args, **kwargs):
        raise OSError("claude cannot start here")

    def no_story(path):
        raise GameError(f"the story file {path} cannot be opened")

    if where == "claude":
        monkeypatch.setattr(_run, "session_parts", no_claude)
    else:
        monkeypatch.setattr(_run, "read_story", no_story)
    with pytest.raises((OSError, GameError), match=r"cannot be opened|cannot start here"):
        await play(RunConfig(game="zork1", player="walkthrough", max_turns=5), runner_settings, ledger=ledger)
    (made,) = runner_settings.runs_dir.iterdir()
    info = RunStore.open(runner_settings.runs_dir, made.name).info
    row = await ledger.get(made.name)
    assert (row["status"], row["reason"]) == ("failed", info.reason) and info.reason.startswith(
        "it could not be played"
    )
    assert row["ended_at"] is not None and row["worker"] is None
    assert json.loads(row["info"])["status"] == "failed" and (await ledger.info(made.name)).ended == info.ended
    assert await all_runs(ledger, runner_settings.runs_dir, status="running") == []
    (listed,) = await all_runs(ledger, runner_settings.runs_dir, status="failed")
    assert (listed["run_id"], listed["status"]) == (made.name, "failed")


async def test_a_run_that_ends_says_when_in_its_record_and_a_resume_clears_it_while_it_plays(runner_settings):
    from frobozz.runner import run_row

    first = await play(RunConfig(game="zork1", player="walkthrough", max_turns=2), runner_settings)
    ended = RunStore.open(runner_settings.runs_dir, first.run_id).info.ended
    row = await run_row(None, runner_settings.runs_dir, first.run_id)
    assert ended is not None and row["ended_at"].isoformat() == ended and row["started_at"] is not None
    seen = []
    again = await play(
        RunConfig(resume=first.run_id, max_turns=3),
        runner_settings,
        on_turn=lambda context, turn: seen.append(context.store.info.ended),
    )
    assert seen == [None] and again.turns == 3  # playing again: not ended
    assert RunStore.open(runner_settings.runs_dir, first.run_id).info.ended >= ended


@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_a_turn_that_cannot_be_recorded_stops_the_run_resumably_and_nothing_recorded_is_lost(
    runner_settings, monkeypatch, mode
):
    """A disk that fills up mid-run: the turn that could not be written stops the run (in text mode it waited for
    ever, in tools mode it went on with that turn missing); what was recorded stays, and a resume, once there is
    room again, goes on from there."""
    record, calls = RunStore.record, []

    def full_once(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return record(self, *args, **kwargs)

    with monkeypatch.context() as patched, anyio.fail_after(120):
        patched.setattr(RunStore, "record", full_once)
        stopped = await play(RunConfig(game="zork1", player="walkthrough", mode=mode, max_turns=5), runner_settings)
    assert (stopped.status, stopped.turns) == ("stopped", 1) and "No space left on device" in stopped.reason
    assert stopped.reason.startswith("a turn could not be recorded: turn 2")
    assert [t.turn for t in _turns(runner_settings, stopped.run_id)] == [1]
    with anyio.fail_after(120):
        resumed = await play(RunConfig(resume=stopped.run_id, max_turns=5), runner_settings)
    assert (resumed.run_id, resumed.turns, resumed.reason) == (stopped.run_id, 5, "max turns")
    assert [t.turn for t in _turns(runner_settings, stopped.run_id)] == [1, 2, 3, 4, 5]
