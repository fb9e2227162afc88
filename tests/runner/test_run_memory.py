"""`play --memory` end to end: the real claude CLI, the scripted player, the real cortex and handoff
servers on a real Postgres."""

import json
import re

import anyio
import pytest

from frobozz._tasks import both
from frobozz.engine.testing import Reply, ToolUse
from frobozz.games import GameLibrary, walkthrough_for
from frobozz.memory import MemoryService
from frobozz.runner import RunConfig, RunStore, play, serve_in_process
from frobozz.runner._players import is_compaction, text_handler, turn_of
from tests.black_hole import BlackHole
from tests.memory_parts import PartsStarted
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
TROLL = "In the Troll Room, the troll is killed with the sword."  # a note names its room, as asked


@pytest.fixture
def memory_env(runner_settings, cortex_settings, monkeypatch):
    """The runner, and the servers claude starts for it, on the test's database."""
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    return runner_settings


def walkthrough(settings):
    return walkthrough_for(GameLibrary(settings).find("zork1").md5)


class Recorder:
    """The scripted walkthrough player, remembering every game message it was sent."""

    def __init__(self, commands, *, store_at=None, big_at=None):
        self.base, self.store_at, self.big_at = text_handler(commands), store_at, big_at
        self.messages: list[str] = []
        self.stored = False

    def __call__(self, request):
        text = request.last_user_text()
        if text and not request.tool_results() and not is_compaction(request):
            self.messages.append(text)
        if self.store_at and f"· {self.store_at} ·" in text and not self.stored and not request.tool_results():
            self.stored = True  # the model stores what it learnt, through cortex, as claude would
            return Reply((ToolUse("mcp__cortex__store", {"content": TROLL}),))
        reply = self.base(request)
        if self.big_at is not None and turn_of(request) == self.big_at and isinstance(reply, Reply):
            return Reply(reply.blocks, input_tokens=170_000)  # the context looks nearly full
        return reply


def located(messages, room):
    return [m for m in messages if re.search(rf"^\[Zork I[^\]]*· {re.escape(room)} ·", m, re.MULTILINE)]


async def test_a_fact_stored_in_one_run_is_recalled_in_the_next_where_it_matters_and_nowhere_else(memory_env):
    """On the stdio servers (the runner's own default, with no factory given): claude starts cortex and handoff."""
    serve_in_process(None)
    commands = walkthrough(memory_env)
    first = Recorder(commands, store_at="The Troll Room")
    one = await play(RunConfig(player="walkthrough", max_turns=30, memory=""), memory_env, handler=first)
    assert first.stored and (one.memory_namespace, one.turns) == ("zork1", 30)
    assert one.memories_stored >= 2  # the fact, and the lessons kept at the end
    second = Recorder(commands, store_at="The Troll Room")  # the same fact again: a duplicate, not stored
    two = await play(RunConfig(player="walkthrough", max_turns=30, memory=""), memory_env, handler=second)
    assert two.memories_stored == 0  # the fact and the lessons were there already
    for result in (one, two):  # the summary, --json, run.json (the web) and the transcript agree
        assert RunStore.open(memory_env.runs_dir, result.run_id).info.memories_stored == result.memories_stored
        summary = (memory_env.runs_dir / result.run_id / "transcript.md").read_text().split("## Summary")[1]
        assert f"| memories stored | {result.memories_stored} |" in summary
    opening = second.messages[0]
    assert opening.startswith("# Orientation") and "## Notes from earlier runs" in opening
    assert "The scripted player knows" in opening and TROLL not in opening  # the lessons, not the troll here
    at_troll = located(second.messages, "The Troll Room")
    assert at_troll and TROLL in at_troll[0] and "<recalled-memories>" in at_troll[0]
    assert sum(TROLL in m for m in second.messages) == 1  # there, once, and nowhere else
    records = RunStore.open(memory_env.runs_dir, two.run_id).turns()
    recalled = [line for r in records for line in r.recalled]
    assert sum(TROLL in line for line in recalled) == 1 and two.memories_recalled == len(recalled)
    assert any("The scripted player knows" in line for line in records[0].recalled)  # the notes shown first
    stored = [r for r in RunStore.open(memory_env.runs_dir, one.run_id).turns() if r.stored]
    assert [r.stored for r in stored] == [[TROLL]] and stored[0].location == "The Troll Room"
    transcript = (memory_env.runs_dir / two.run_id / "transcript.md").read_text()
    assert "*Recalled:* [memory " in transcript and f"| memories recalled | {len(recalled)} |" in transcript
    assert "*Recalled:* [memory " in transcript.split("## Turn 2:")[0]  # the notes from earlier runs, at turn 1


async def test_a_full_window_is_handed_off_and_the_next_starts_oriented_and_plays_on_to_the_same_result(memory_env):
    memory_env.context_window = 200_000
    commands = walkthrough(memory_env)
    player = Recorder(commands, big_at=12)
    with_handoff, plain = await both(
        lambda: play(RunConfig(player="walkthrough", max_turns=40, memory=""), memory_env, handler=player),
        lambda: play(RunConfig(player="walkthrough", max_turns=40), memory_env),
    )
    asked = [m for m in player.messages if "Call the handoff tool now" in m]
    assert len(asked) == 1 and "85% full" in asked[0]
    window = [m for m in player.messages[1:] if m.startswith("# Orientation")]
    assert len(window) == 1
    for section in (
        "## Where you are",
        "## Inventory",
        "## Explored map",
        "## Score so far",
        "## This run's latest hand-off letter",
        "Following the walkthrough: 13 commands done.",
    ):
        assert section in window[0]
    assert "West of House" in window[0] and "unexplored:" in window[0]  # the map, with exits not yet taken
    assert (with_handoff.handoffs, with_handoff.compactions) == (1, 1)

    def same(r):
        return (r.turn, r.command, r.score, r.location, r.text)

    turns = RunStore.open(memory_env.runs_dir, with_handoff.run_id).turns()
    assert [same(r) for r in turns] == [same(r) for r in RunStore.open(memory_env.runs_dir, plain.run_id).turns()]
    assert [r.turn for r in turns if r.handoff] == [14] and [r.turn for r in turns if r.compacted] == [15]
    assert (with_handoff.score, with_handoff.turns) == (plain.score, plain.turns) == (plain.score, 40)


async def test_without_memory_a_run_is_what_it_was_and_with_an_empty_memory_it_plays_the_same(memory_env):
    commands = walkthrough(memory_env)
    bare, remembering = Recorder(commands), Recorder(commands)
    without, with_empty = await both(
        lambda: play(RunConfig(player="walkthrough", max_turns=25), memory_env, handler=bare),
        lambda: play(RunConfig(player="walkthrough", max_turns=25, memory="empty-ns"), memory_env, handler=remembering),
    )
    assert bare.messages[0].startswith("You are playing Zork I") and "cortex" not in bare.messages[0]
    assert not any("# Orientation" in m or "<recalled-memories>" in m for m in bare.messages)
    assert without.memory_namespace is None and (without.memories_recalled, without.memories_stored) == (0, 0)
    info = RunStore.open(memory_env.runs_dir, without.run_id).info
    assert (info.memory_namespace, info.memory_session, info.lessons) == (None, None, 0)
    # an empty namespace: an orientation with nothing from earlier runs, nothing recalled, the same game
    assert "## Notes from earlier runs" not in remembering.messages[0] and "cortex" in remembering.messages[0]
    assert not any("<recalled-memories>" in m for m in remembering.messages)

    def same(r):
        return (r.turn, r.command, r.score, r.text)

    assert [same(r) for r in RunStore.open(memory_env.runs_dir, without.run_id).turns()] == [
        same(r) for r in RunStore.open(memory_env.runs_dir, with_empty.run_id).turns()
    ]
    assert with_empty.memory_namespace == "empty-ns" and with_empty.memories_recalled == 0


async def test_with_the_database_gone_a_memory_run_fails_saying_so(runner_settings, monkeypatch):
    from frobozz.runner import PlayerError

    monkeypatch.setenv("FROBOZZ_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    with pytest.raises(PlayerError, match="--memory: "):
        await play(RunConfig(player="walkthrough", max_turns=3, memory=""), runner_settings)


async def test_with_the_database_hung_one_recall_goes_without_the_next_start_nothing_and_memory_comes_back(
    cortex_settings, caplog, monkeypatch
):
    """A database that accepts and never answers: recall under every status line waited out its bound, turn after
    turn. Now the first finds it silent and memory is off for the run (said once); the next turns' recall and
    archive are not started, until a probe finds the database answering again."""
    from frobozz.memory import MemorySettings
    from frobozz.runner._run_memory import RunMemory

    at_troll = ("The Troll Room", "A nasty-looking troll, brandishing a bloody axe, blocks all passages out.")
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        memory = await RunMemory.open(MemorySettings(database_url=hole.url), namespace="hung", run_id="hung")
        try:
            await memory.store.store(TROLL, {}, "hung")
            parts = PartsStarted(monkeypatch)
            hole.hang()
            with anyio.fail_after(60):
                first = await memory.recall(*at_troll)
            hung, turned_off = parts.since(0), parts.mark()
            with anyio.fail_after(60):
                second = await memory.recall(*at_troll)
                await memory.archive_user("kill troll with sword")
            off = parts.since(turned_off)
            hole.answer()
            with anyio.fail_after(30):
                await eventually(memory.service.answering_now)  # a probe, due every few seconds, finds it back
            back = parts.mark()
            third = await memory.recall(*at_troll)
            await memory.archive_user("kill troll with sword")
            on = parts.since(back)
        finally:
            await memory.aclose()
    assert (first, second) == ("", "")  # the game went on without memory
    assert caplog.text.count("memory is off: the database does not answer (recall: slower than") == 1
    assert hung == ["recall"] and off == []  # the first waited its bound; the next turn started neither part
    assert "was left out" not in caplog.text  # the one line says it
    assert TROLL in third and on == ["recall", "archiving: user"]


async def test_lessons_keep_their_run_score_and_turn_in_their_metadata(memory_env, cortex_settings):
    result = await play(RunConfig(player="walkthrough", max_turns=5, memory="lessons"), memory_env)
    service = MemoryService(cortex_settings)
    try:
        kept = await (await service.store()).recent(10, "lessons", metadata={"kind": "lesson"})
    finally:
        await service.aclose()
    assert kept and {m.metadata["run_id"] for m in kept} == {result.run_id}
    assert {(m.metadata["score"], m.metadata["turn"]) for m in kept} == {(result.score, 5)}


async def test_in_tools_mode_memory_adds_its_tools_to_the_game_tools_and_opens_with_the_orientation(memory_env):
    from frobozz.runner._players import tool_handler

    requests = []
    base = tool_handler(walkthrough(memory_env), "zork1")

    def handler(request):
        requests.append(request)
        return base(request)

    result = await play(
        RunConfig(player="walkthrough", mode="tools", max_turns=8, memory="tools-ns"), memory_env, handler=handler
    )
    assert (result.turns, result.reason, result.memory_namespace) == (8, "max turns", "tools-ns")
    tools = set(requests[0].tools)
    assert {"mcp__game__act", "mcp__cortex__store", "mcp__cortex__search", "mcp__handoff__handoff"} <= tools
    opening = requests[0].last_user_text()
    assert opening.startswith("# Orientation") and "cortex stores and searches notes" in opening
    assert "## Score so far\nThe game has not started yet." in opening
    assert result.memories_stored == 1  # the lesson the scripted player gave at the end


def _answer(text):
    """A game tool's answer, as the model read it (JSON), or {} for any other tool's."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class ToolsRecorder:
    """The scripted tools player, remembering the game answers (tool results) and the user messages it saw."""

    def __init__(self, commands, *, store_at=None, big_at=None):
        from frobozz.runner._players import tool_handler

        self.base, self.store_at, self.big_at = tool_handler(commands, "zork1"), store_at, big_at
        self.answers: list[str] = []
        self.messages: list[str] = []
        self.stored = False

    def __call__(self, request):
        from frobozz.engine import text_of
        from frobozz.runner._players import _acts_done

        answers = [text_of(r.get("content")) for r in request.tool_results()]
        if not is_compaction(request):
            self.answers += answers
            if request.last_user_text():  # after an interrupt, claude sends a tool's result with it
                self.messages.append(request.last_user_text())
        if self.store_at and not self.stored and any(_answer(a).get("location") == self.store_at for a in answers):
            self.stored = True
            return Reply((ToolUse("mcp__cortex__store", {"content": TROLL}),))
        reply = self.base(request)
        if self.big_at is not None and _acts_done(request) == self.big_at and isinstance(reply, Reply):
            return Reply(reply.blocks, input_tokens=170_000)
        return reply


async def test_in_tools_mode_the_game_answer_carries_what_memory_recalls_for_its_room_from_the_runs_own_pool(
    memory_env, monkeypatch
):
    """cortex, handoff and the game server, served in the run's process, are on the run's MemoryService: the game
    server's recall opens no pool nor embedding model of its own (each cost a second of start and a model's
    memory)."""
    from tests.memory_services import ServicesSeen

    commands = walkthrough(memory_env)
    first = ToolsRecorder(commands, store_at="The Troll Room")
    await play(
        RunConfig(player="walkthrough", mode="tools", max_turns=30, memory="tools-recall"), memory_env, handler=first
    )
    assert first.stored and not any('"recalled"' in a for a in first.answers)  # nothing to recall in run 1
    second = ToolsRecorder(commands)
    seen = ServicesSeen(monkeypatch)
    two = await play(
        RunConfig(player="walkthrough", mode="tools", max_turns=30, memory="tools-recall"), memory_env, handler=second
    )
    assert len(seen.made) > 1 and len(seen.pools) == 1 and len(seen.embedders) == 1, (seen.pools, seen.made)
    carrying = [_answer(a) for a in second.answers if TROLL in a]
    assert len(carrying) == 1 and carrying[0]["location"] == "The Troll Room"
    assert [TROLL in line for line in carrying[0]["recalled"]] == [True]
    records = RunStore.open(memory_env.runs_dir, two.run_id).turns()
    assert [r.location for r in records if TROLL in " ".join(r.recalled)] == ["The Troll Room"]
    shown_first = records[0].recalled  # the notes from earlier runs the orientation showed, recorded too
    assert shown_first and all(TROLL not in line for line in shown_first)
    assert two.memories_recalled == sum(len(r.recalled) for r in records) and two.turns == 30


async def test_in_tools_mode_a_full_window_is_handed_off_mid_turn_and_play_goes_on_to_the_same_result(memory_env):
    memory_env.context_window = 200_000
    commands = walkthrough(memory_env)
    player = ToolsRecorder(commands, big_at=12)
    with_handoff = await play(
        RunConfig(player="walkthrough", mode="tools", max_turns=40, memory="tools-handoff"), memory_env, handler=player
    )
    plain = await play(RunConfig(player="walkthrough", mode="tools", max_turns=40), memory_env)
    asked = [a for a in player.answers if "Call the handoff tool now" in a]
    assert len(asked) == 1 and "85% full" in _answer(asked[0])["note"]  # it came with a game answer
    window = [m for m in player.messages[1:] if "# Orientation" in m]
    assert len(window) == 1 and window[0].rstrip().endswith("keep playing with the act tool.")
    for section in (
        "## Where you are",
        "## Explored map",
        "## This run's latest hand-off letter",
        "Playing through the game tools: 13 commands done.",
        "session_id ",
    ):
        assert section in window[0]
    assert (with_handoff.handoffs, with_handoff.compactions) == (1, 1)

    def same(r):
        return (r.turn, r.command, r.score, r.location, r.text)

    turns = RunStore.open(memory_env.runs_dir, with_handoff.run_id).turns()
    assert [same(r) for r in turns] == [same(r) for r in RunStore.open(memory_env.runs_dir, plain.run_id).turns()]
    assert (with_handoff.score, with_handoff.turns) == (plain.score, plain.turns) == (plain.score, 40)


async def test_in_tools_mode_claude_compacting_on_its_own_mid_turn_sends_the_orientation_with_the_next_answer(
    cortex_settings, tmp_path
):
    """claude's automatic compaction cannot be brought about here on demand; the runner's part is what
    follows it: the orientation waits in the mailbox for the game server's next answer."""
    from frobozz._mailbox import Mailbox
    from frobozz.engine import CompactBoundary
    from frobozz.runner._orient import GameView
    from frobozz.runner._run_memory import RunMemory

    class Posted(Mailbox):
        posted = anyio.Event()

        def post(self, text):
            super().post(text)
            self.posted.set()

    memory = await RunMemory.open(cortex_settings, namespace="auto-compact", run_id="r1")
    try:
        mailbox = Posted(tmp_path / "mailbox")
        env = memory.game_server_env(mailbox)
        assert env["FROBOZZ_GAME_MAILBOX"] == str(tmp_path / "mailbox") and mailbox.take() == []

        async def view():
            return GameView(
                "Play Zork I.",
                "[Zork I · score 0/350 · moves 4 · Attic · turn 4 of 40]",
                "Attic",
                "Attic",
                "A brass lantern",
                session_id="0123456789abcdef",
            )

        async def settled():
            return None

        async with anyio.create_task_group() as tg:
            tg.start_soon(memory.between_moves, None, view, settled, lambda: 0)
            memory.watch.on_event(CompactBoundary(trigger="auto", pre_tokens=190_000))
            with anyio.fail_after(30):
                await mailbox.posted.wait()
            tg.cancel_scope.cancel()
        notes = mailbox.take()
    finally:
        await memory.aclose()
    assert len(notes) == 1 and notes[0].startswith("# Orientation")
    assert "session_id 0123456789abcdef" in notes[0] and "A brass lantern" in notes[0]
    assert not memory.watch.compacted and memory.watch.compactions == 1


async def test_a_memory_run_serves_cortex_and_handoff_in_its_own_process(memory_env, cortex_settings, spans):
    """No `frobozz serve cortex|handoff` process is started for claude (each cost about 1 CPU-s and 1 s before
    claude was ready): the run serves them on its own pool, storing in its namespace and marking what it stores
    seen in its loop session; handoff signs the letter with the claude session it serves; a traced call's span
    is a child of the engine's span for it, as a subprocess server's was."""
    import os

    from frobozz import _spans as S
    from tests.orphans import descendants_seen

    memory_env.context_window = 200_000
    player = Recorder(walkthrough(memory_env), store_at="Up a Tree", big_at=6)
    async with descendants_seen() as seen:  # the command lines of every process below this one, while it plays
        result = await play(
            RunConfig(player="walkthrough", max_turns=12, memory="own-process"), memory_env, handler=player
        )
    assert player.stored and (result.handoffs, result.compactions, result.turns) == (1, 1, 12)
    serving = [line for line in seen if "serve" in line and {"cortex", "handoff"} & set(line)]
    assert not serving, serving
    claudes = [line for line in seen if line and os.path.basename(line[0]) == "claude"]
    configs = [json.loads(line[i + 1]) for line in claudes for i, a in enumerate(line) if a == "--mcp-config"]
    assert claudes and {"cortex": {"type": "sdk", "name": "cortex"}, "handoff": {"type": "sdk", "name": "handoff"}} in [
        c["mcpServers"] for c in configs
    ]

    info = RunStore.open(memory_env.runs_dir, result.run_id).info
    service = MemoryService(cortex_settings)
    try:
        store, sessions = await service.store(), await service.sessions()
        [note] = [m for m in await store.recent(10, "own-process") if m.content == TROLL]
        assert await sessions.unseen(info.memory_session, [note.id]) == []  # recall will not hand it back
        letter = await (await service.handoffs()).latest("own-process")
    finally:
        await service.aclose()
    assert letter is not None and info.claude_session_id and letter.session_id == info.claude_session_id

    finished = spans.get_finished_spans()
    for tool, call in (("mcp__cortex__store", "tools/call store"), ("mcp__handoff__handoff", "tools/call handoff")):
        [asked] = [s for s in finished if s.name == f"{S.EXECUTE_TOOL} {tool}"]
        [served] = [s for s in finished if s.name == call]
        assert served.parent is not None and served.parent.span_id == asked.context.span_id
