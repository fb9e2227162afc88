"""The hooks' memory in the daemon, called directly (no claude, no hook command): what a hook, and the work it leaves
in the background, waits on."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from threading import Event
from typing import Any

import anyio
import pytest

from frobozz.memory import DatabaseError, MemoryService, MemorySettings, TranscriptStore, check_namespace
from frobozz.plugin import HookMemory, _hook_memory, project_namespace
from frobozz.plugin._transcript import read_transcript
from frobozz.plugin.exceptions import PluginError
from tests.black_hole import BlackHole
from tests.memory_parts import EVERY_PART, PartsStarted
from tests.waiting import eventually

from .conftest import CAT

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def claude_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """claude's config folder for the test (the only place the hooks read a transcript from: its `projects/`)."""
    folder = tmp_path / "claude"
    (folder / "projects").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder))
    return folder


def prompt(text: str) -> dict[str, str]:
    return {"session_id": "s-1", "cwd": "", "prompt": text}


async def test_with_the_database_hung_one_prompt_goes_without_the_next_start_nothing_and_memory_comes_back(
    cortex_settings, embedder_ready, caplog, monkeypatch
):
    """A database that accepts and never answers, mid-session: every prompt waited out the archive (unbounded, up to
    the hook's limit), recall and the nudge. Now the first prompt finds it silent and memory is off (said once); the
    next is refused at once (the daemon lets it through, saying the database cannot be reached) with no part started,
    until a probe finds the database answering again."""
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        service = MemoryService(MemorySettings(database_url=hole.url))
        try:
            store = await service.store()
            await store.store(CAT, namespace="myproject")
            await store.embedder.embed(["warming up"])
            hooks = HookMemory(service, deadline=2.0)
            assert await hooks.handle("UserPromptSubmit", prompt("hello"), "myproject") == ""  # the session adopted
            caplog.clear()  # (what the answering database's prompt said is not this test's)
            parts = PartsStarted(monkeypatch)
            hole.hang()
            with anyio.fail_after(60):
                first = await hooks.handle("UserPromptSubmit", prompt("What is my cat called?"), "myproject")
            hung, turned_off = parts.since(0), parts.mark()
            with anyio.fail_after(60), pytest.raises(DatabaseError, match="memory is off"):
                await hooks.handle("UserPromptSubmit", prompt("What is my cat called?"), "myproject")
            off = parts.since(turned_off)
            hole.answer()
            with anyio.fail_after(30):
                await eventually(service.answering_now)  # a probe, due every few seconds, finds it back
            back = parts.mark()
            third = await hooks.handle("UserPromptSubmit", prompt("What is my cat called?"), "myproject")
            on = parts.since(back)
        finally:
            await service.aclose()
    assert first == ""  # the prompt went without memory
    assert caplog.text.count("memory is off: the database does not answer (archiving the prompt: slower than") == 1
    assert hung == ["archiving: user"] and off == []  # the archive waited its bound; recall and the nudge did not
    assert "was left out" not in caplog.text  # the one line says it
    assert CAT in third and on == ["archiving: user", "recall", "the nudge"]


EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "PreCompact", "SessionEnd")
WAITED = {  # the part each hook starts on a database that hangs (the rest of the hook, none), and its line's name
    "SessionStart": ("the session's record", "the session's record"),
    "PostToolUse": ("clearing the suggestions", "clearing the suggestions"),
    "Stop": ("archiving: assistant", "archiving the answer"),
    "PreCompact": ("writing a hand-off letter", "the hand-off letter"),
    "SessionEnd": ("archiving: note", "archiving the session's end"),
}
ORIENTATION = ["the hand-off letter", "a capsule", "a capsule", "the newest memories"]  # its providers' parts
AGAIN = {  # what each starts once the database answers again (the session adopted anew: SessionEnd let it go)
    "SessionStart": ["the session's record", "a new window", *sorted(ORIENTATION)],
    "PostToolUse": ["the session's record", "clearing the suggestions"],
    "Stop": ["the session's record", "the turns", "archiving: assistant"],
    "PreCompact": ["the session's record", "writing a hand-off letter"],
    "SessionEnd": ["the session's record", "the turns", "archiving: note"],
}


def hook_input(event: str, when: str, transcript: Path) -> dict[str, str]:
    """The hook's input, saying `when` it was sent where it is kept (the answer, the end's reason)."""
    return {"session_id": "s-1", "cwd": ""} | {
        "SessionStart": {"source": "startup"},
        "UserPromptSubmit": {"prompt": f"What is my cat called? ({when})"},
        "PostToolUse": {"tool_name": "mcp__plugin_frobozz-memory_cortex__store"},
        "Stop": {"last_assistant_message": f"Your cat is called Zorkmid. ({when})"},
        "PreCompact": {"transcript_path": str(transcript)},
        "SessionEnd": {"reason": when},
    }[event]


def conversation(tmp_path: Path, folder: Path | None = None) -> Path:
    """Claude's transcript of session s-1: an exchange, and a tool call with its result; in claude's projects folder
    (the test's `claude_config`), or in `folder`."""
    path = (folder or tmp_path / "claude" / "projects" / "project") / "s-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "grue.txt"}
    entries = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "Where is the grue?"}},
        {"type": "assistant", "uuid": "u2", "message": {"role": "assistant", "content": [use]}},
        {"type": "user", "uuid": "u3", "message": {"role": "user", "content": [result]}},
        {"type": "assistant", "uuid": "u4", "message": {"role": "assistant", "content": "In grue.txt."}},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


@pytest.mark.parametrize("event", WAITED)
async def test_with_the_database_hung_each_hook_waits_out_one_part_then_no_hook_starts_any_until_it_answers(
    event, cortex_settings, tmp_path, caplog, monkeypatch
):
    """A database that accepts and never answers: every hook but the prompt's waited on it up to its limit, each
    time (the session's record, the archive, clearing the suggestions, the letter, unbounded). Now the hook that
    meets it first waits out one part's bound, memory is off (said once), and every hook is then refused at once
    (the daemon lets it through, saying the database cannot be reached) with no part started, the letter not even
    asked for, until a probe finds the database answering and the hook does its work again."""
    transcript, asked = conversation(tmp_path), []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return f"Letter {len(asked)}: the grue is in grue.txt.\n- read it"

    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        service = MemoryService(MemorySettings(database_url=hole.url))
        try:
            await (await service.handoffs()).write("Before: the lamp is lit.", ["go north"], None, "myproject", None)
            hooks = HookMemory(service, ask=ask, deadline=1.0)
            opening = hook_input("UserPromptSubmit", "before", transcript)
            assert await hooks.handle("UserPromptSubmit", opening, "myproject") == ""  # the session adopted, its turn
            caplog.clear()
            parts = PartsStarted(monkeypatch, EVERY_PART)
            hole.hang()
            with anyio.fail_after(30):
                first = await hooks.handle(event, hook_input(event, "hung", transcript), "myproject")
            hung, turned_off, letters = parts.started[:], parts.mark(), len(asked)
            for other in EVENTS:
                with anyio.fail_after(30), pytest.raises(DatabaseError, match="memory is off"):
                    await hooks.handle(other, hook_input(other, "off", transcript), "myproject")
            off, asked_off = parts.started[turned_off:], asked[letters:]
            hole.answer()
            with anyio.fail_after(30):
                await eventually(service.answering_now)  # a probe, due every few seconds, finds it back
            sessions = await service.sessions()
            await sessions.suggest("s-1", ["The lamp is brass."])
            back = parts.mark()
            again = await hooks.handle(event, hook_input(event, "back", transcript), "myproject")
            on = parts.started[back:]
            entries = await sessions.transcript("s-1")
            waiting = await sessions.suggestions("s-1")
            letter = await (await service.handoffs()).latest("myproject")
        finally:
            await service.aclose()
    part, line = WAITED[event]
    assert hung == [part]  # the one part that waited its bound: none after it, nor the orientation's providers
    assert caplog.text.count(f"memory is off: the database does not answer ({line}: slower than") == 1
    assert off == [] and asked_off == []  # refused at once: nothing started, no letter asked for
    assert "was left out" not in caplog.text and "is left out" not in caplog.text  # the one line says it
    assert (on[:2] + sorted(on[2:]) if event == "SessionStart" else on) == AGAIN[event]  # (providers run together)
    if event != "SessionStart":
        assert first == ""  # the hook went without memory
    if event == "SessionStart":
        assert "Here and now" in first and "Hand-off letter" not in first  # what needs no database
        assert "Here and now" in again and "the lamp is lit" in again
    elif event == "Stop":
        assert entries[-1].kind == "assistant" and entries[-1].content.endswith("(back)")
    elif event == "SessionEnd":
        assert entries[-1].kind == "note" and entries[-1].content == "the session ended (back)"
    elif event == "PreCompact":
        assert letter is not None and letter.summary.startswith(f"Letter {len(asked)}:") and len(asked) == 2
    else:
        assert waiting == []  # what waited to be kept is offered no more


async def test_with_the_database_hung_background_work_under_way_starts_no_part_and_goes_on_once_it_answers(
    cortex_settings, tmp_path, caplog, monkeypatch
):
    """The daemon's background work (suggestions after an answer, claude's transcript and the capsules after the
    session's end) holds the session store it began with: once its model turn or its reading ended it went on to its
    writes as if memory were on, each on a database that does not answer. Now, with memory off meanwhile (the next
    prompt found the database silent), none of them starts; once the database answers, the same work is done."""

    transcript, asked, answers, reading, read = conversation(tmp_path), [], anyio.Event(), Event(), Event()

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        await answers.wait()
        return "The user's dog is called Rex."

    def held(path: str, session_id: str) -> Any:
        reading.set()
        read.wait(30)
        return read_transcript(path, session_id)

    monkeypatch.setattr(_hook_memory, "read_transcript", held)
    ns = "myproject"
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        service = MemoryService(MemorySettings(database_url=hole.url))
        try:
            sessions = await service.sessions()
            await sessions.adopt("s-0", ns, client="claude code")  # an earlier session, for the capsules
            await sessions.archive("s-0", 1, "user", "My dog is called Rex.")
            await sessions.archive("s-0", 1, "assistant", "Noted.")
            hooks = HookMemory(service, ask=ask, deadline=1.0)
            end = {**hook_input("SessionEnd", "ended", transcript), "transcript_path": str(transcript)}
            with anyio.fail_after(60):  # (the task group's end waits for the background work)
                async with anyio.create_task_group() as tg:
                    hooks.background(tg)
                    await hooks.handle("UserPromptSubmit", hook_input("UserPromptSubmit", "before", transcript), ns)
                    await hooks.handle("Stop", hook_input("Stop", "before", transcript), ns)  # suggestions: asking
                    await hooks.handle("SessionEnd", end, ns)  # the transcript: reading; the capsules: asking
                    await eventually(lambda: len(asked) == 2 and reading.is_set())
                    caplog.clear()
                    parts = PartsStarted(monkeypatch, EVERY_PART)
                    hole.hang()
                    await hooks.handle("UserPromptSubmit", hook_input("UserPromptSubmit", "hung", transcript), ns)
                    turned_off = parts.mark()
                    answers.set()  # the model turns end, the reading too: each goes on to its writes
                    read.set()
            hung, off = parts.started[:turned_off], parts.started[turned_off:]
            hole.answer()
            with anyio.fail_after(30):
                await eventually(service.answering_now)  # a probe, due every few seconds, finds it back
            back = parts.mark()
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    hooks.background(tg)
                    await hooks.handle("Stop", hook_input("Stop", "back", transcript), ns)
                    await hooks.handle("SessionEnd", end, ns)
            on = parts.started[back:]
            waiting = await sessions.suggestions("s-1")
            capsule = await sessions.capsule(ns, "the last session")
            tools = [e.kind for e in await sessions.transcript("s-1") if e.kind.startswith("tool_")]
        finally:
            await service.aclose()
    assert hung == ["the session's record"]  # the prompt's, which waited its bound and turned memory off
    assert caplog.text.count("memory is off: the database does not answer (the session's record: slower than") == 1
    assert off == []  # the suggestions, the transcript and the capsules went on without starting a part
    assert "was left out" not in caplog.text and "failed" not in caplog.text and "not read" not in caplog.text
    assert {"suggesting", "the transcript store", "keeping the transcript", "writing a capsule"} <= set(on)
    assert waiting == ["The user's dog is called Rex."] and capsule is not None and "Rex" in capsule.summary
    assert tools == ["tool_use", "tool_result"]


async def test_a_prompt_over_a_million_characters_is_archived_cut_and_its_turn_goes_on(memory_service):
    """Such a prompt (or answer) failed the hook's input: nothing archived, the answer put under the turn before,
    and the user told memory was off."""
    hooks = HookMemory(memory_service, deadline=30.0)
    turn = {"session_id": "s-1", "cwd": ""}
    for n, (asked, said) in enumerate([("hello", "hi"), ("x" * 1_500_000, "y" * 1_500_000), ("bye", "bye")]):
        assert await hooks.handle("UserPromptSubmit", {**turn, "prompt": asked}, "myproject") == "", n
        assert await hooks.handle("Stop", {**turn, "last_assistant_message": said}, "myproject") == "", n
    entries = await (await memory_service.sessions()).transcript("s-1")
    assert [(e.turn, e.kind, len(e.content)) for e in entries] == [
        (1, "user", 5),
        (1, "assistant", 2),
        (2, "user", _hook_memory.MAX_TEXT),  # its start
        (2, "assistant", _hook_memory.MAX_TEXT),
        (3, "user", 3),
        (3, "assistant", 3),
    ]


async def test_a_prompt_with_a_nul_is_recalled_for_and_the_sessions_transcript_kept_without_it(
    memory_service, embedder_ready, tmp_path
):
    """A NUL in the prompt: recall's search failed (Postgres text holds none), and at the session's end the whole
    transcript was refused."""
    await (await memory_service.store()).store(CAT, namespace="myproject")
    hooks = HookMemory(memory_service, deadline=30.0)  # (a bound, not a wait: recall ends when it is done)
    asked = "What is my cat\x00 called?"
    recalled = await hooks.handle("UserPromptSubmit", prompt(asked), "myproject")
    assert CAT in recalled
    path = tmp_path / "claude" / "projects" / "project" / "s-1.jsonl"
    path.parent.mkdir()
    said = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": asked}},
        {"type": "assistant", "uuid": "u2", "message": {"role": "assistant", "content": "Zorkmid.\x00"}},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in said))
    await hooks.handle("SessionEnd", {"session_id": "s-1", "cwd": "", "transcript_path": str(path)}, "myproject")
    transcripts = await TranscriptStore.on((await memory_service.store()).pool)
    kept = await transcripts.load({"project_key": "project", "session_id": "s-1"})
    assert [e["message"]["content"] for e in kept or []] == ["What is my cat called?", "Zorkmid."]


async def test_a_prompt_with_a_lone_surrogate_is_recalled_for_and_archived_with_a_replacement_character(
    memory_service, embedder_ready
):
    """`"prompt": "cat \\ud800"` in a hook's JSON is read as a lone surrogate, which Postgres cannot keep: the hook's
    connection failed (DataError) and the user was told memory's answer could not be read."""
    await (await memory_service.store()).store(CAT, namespace="myproject")
    hooks = HookMemory(memory_service, deadline=30.0)  # (a bound, not a wait: recall ends when it is done)
    asked = json.loads('"What is my cat \\ud800 called?"')
    assert CAT in await hooks.handle("UserPromptSubmit", prompt(asked), "myproject")
    said = {"session_id": "s-1", "cwd": "", "last_assistant_message": json.loads('"Zorkmid \\udfff."')}
    assert await hooks.handle("Stop", said, "myproject") == ""
    entries = await (await memory_service.sessions()).transcript("s-1")
    assert [e.content for e in entries] == ["What is my cat \ufffd called?", "Zorkmid \ufffd."]


def test_every_project_folder_gives_a_valid_namespace_and_folders_named_in_nothing_it_keeps_do_not_share_one(
    tmp_path,
):
    """`_scratch` gave `_scratch`, which no namespace may be (memory was off, and nothing said); `проект` and `项目`
    (and `__`) all gave `default`, so unrelated projects shared their memory."""
    folders = [tmp_path / name for name in ("_scratch", "__", "проект", "项目", "My Project")]
    folders.append(tmp_path / "elsewhere" / "проект")
    for folder in folders:
        folder.mkdir(parents=True)
    spaces = [project_namespace(str(folder)) for folder in folders]
    assert [check_namespace(ns) for ns in spaces] == spaces
    assert len(set(spaces)) == len(folders)
    assert spaces[0].startswith("scratch-") and spaces[-2] == "My-Project"
    assert [project_namespace(str(folder)) for folder in folders] == spaces  # the same every time
    assert check_namespace(project_namespace(str(tmp_path / "\ud800")))  # (a path no file can have)


def test_folders_whose_names_differ_only_in_what_a_namespace_cannot_hold_do_not_share_one(tmp_path):
    """`проект-2` and `项目-2` both gave `2`; `café`, `cafè` and `caf` gave `caf`; `_scratch` and `scratch` gave
    `scratch`; two long names alike in their first 100 characters gave the same: unrelated projects shared memory."""
    names = ["проект-2", "项目-2", "2", "café", "cafè", "caf", "_scratch", "scratch", "a" * 120, "a" * 100 + "b" * 20]
    names += ["end.", "end", "My Project", "My-Project_2.x:y"]
    for name in names:
        (tmp_path / name).mkdir()
    spaces = {name: project_namespace(str(tmp_path / name)) for name in names}
    assert [check_namespace(ns) for ns in spaces.values()] == list(spaces.values())
    assert len(set(spaces.values())) == len(names)
    kept = ["2", "caf", "scratch", "end", "My-Project_2.x:y"]
    assert {name: spaces[name] for name in [*kept, "My Project"]} == {
        **{n: n for n in kept},
        "My Project": "My-Project",
    }
    digest = {name: hashlib.sha256(str(tmp_path / name).encode()).hexdigest()[:10] for name in names}
    assert spaces["проект-2"] == f"2-{digest['проект-2']}" and spaces["café"] == f"caf-{digest['café']}"
    assert spaces["_scratch"] == f"scratch-{digest['_scratch']}" and spaces["end."] == f"end-{digest['end.']}"
    assert spaces["a" * 120] == f"{'a' * 89}-{digest['a' * 120]}" and len(spaces["a" * 120]) == 100
    assert [project_namespace(str(tmp_path / name)) for name in names] == list(spaces.values())  # the same each time


BOBS_CODE = "Bob's vault code is 4711."


async def test_a_hook_naming_a_session_of_another_namespace_is_refused_and_reads_and_writes_nothing_there(
    memory_service, embedder_ready, tmp_path
):
    """A session id is the client's to name: a hook in `alices` naming Bob's session worked in it, under its namespace
    (`bobs`): recall and the orientation showed Bob's memories, the prompt went into Bob's archive, a memory kept
    cleared Bob's suggestions, the session's end archived Alice's transcript as Bob's. Now every hook is refused
    (memory off for it), whether the daemon already holds Bob's session or finds it in the database."""
    store, sessions = await memory_service.store(), await memory_service.sessions()
    await store.store(BOBS_CODE, namespace="bobs")
    transcript, asked = conversation(tmp_path, tmp_path / "claude" / "projects" / "alice"), []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return "Alice was looking for the grue.\n- read grue.txt"

    bobs_hooks = HookMemory(memory_service, ask=ask, deadline=30.0)
    bob = {"session_id": "bob-session", "cwd": ""}
    assert BOBS_CODE in await bobs_hooks.handle(
        "UserPromptSubmit", {**bob, "prompt": "What is the vault code?"}, "bobs"
    )
    await sessions.suggest("bob-session", ["Bob keeps the vault at home."])
    before = [(e.kind, e.content) for e in await sessions.transcript("bob-session")]
    alice = {
        "SessionStart": {"source": "startup"},
        "UserPromptSubmit": {"prompt": "What is the vault code?"},
        "PostToolUse": {"tool_name": "mcp__plugin_frobozz-memory_cortex__store"},
        "Stop": {"last_assistant_message": "The code is 4711."},
        "PreCompact": {"transcript_path": str(transcript)},
        "SessionEnd": {"reason": "logout", "transcript_path": str(transcript)},
    }
    for hooks in (bobs_hooks, HookMemory(memory_service, ask=ask, deadline=30.0)):  # (the hub's one; a fresh one)
        for event, more in alice.items():
            with pytest.raises(PluginError, match="another namespace") as refused:
                await hooks.handle(event, {**bob, "session_id": "bob-session", **more}, "alices")
            assert "bobs" not in str(refused.value), event
    after = [(e.kind, e.content) for e in await sessions.transcript("bob-session")]
    assert after == before and await sessions.suggestions("bob-session") == ["Bob keeps the vault at home."]
    assert asked == [] and await (await memory_service.handoffs()).latest("alices") is None
    transcripts = await TranscriptStore.on(store.pool)
    assert await transcripts.load({"project_key": "alice", "session_id": "bob-session"}) is None
    assert (await sessions.get("bob-session")).namespace == "bobs"
    await bobs_hooks.handle("UserPromptSubmit", {**bob, "prompt": "And the vault code?"}, "bobs")
    last = (await sessions.transcript("bob-session"))[-1]
    assert (last.turn, last.content) == (2, "And the vault code?")  # Bob's own session goes on as before


async def test_a_transcript_outside_claudes_projects_folder_is_not_read_and_one_inside_is(
    memory_service, tmp_path, claude_config, caplog
):
    """The hooks read whatever `transcript_path` the input named (the hub's, from another machine): the conversation
    in any JSONL file went to the model and came back as a letter in the caller's namespace, and the session's end
    kept any `<session id>.jsonl` file. Now only one in claude's projects folder (where this process's user's claude
    keeps them) is read: not one elsewhere, nor one reached through a symlink or `..` out of it."""
    asked: list[str] = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return f"Letter {len(asked)}: the grue is in grue.txt.\n- read it"

    elsewhere = conversation(tmp_path, tmp_path / "elsewhere")
    projects = claude_config / "projects"
    (projects / "linked").mkdir()
    (projects / "linked" / "s-1.jsonl").symlink_to(elsewhere)
    (projects / "linked" / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    outside = [
        str(elsewhere),
        str(projects / "linked" / "s-1.jsonl"),
        str(projects / "linked" / "out" / "s-1.jsonl"),
        str(projects / ".." / ".." / "elsewhere" / "s-1.jsonl"),
        str(projects),
        "s-1.jsonl",  # (relative: the daemon's own folder)
    ]
    hooks = HookMemory(memory_service, ask=ask, deadline=30.0)
    handoffs, transcripts = (
        await memory_service.handoffs(),
        await TranscriptStore.on((await memory_service.store()).pool),
    )
    turn = {"session_id": "s-1", "cwd": ""}
    for path in outside:
        caplog.clear()
        assert await hooks.handle("PreCompact", {**turn, "transcript_path": path}, "myproject") == "", path
        assert await hooks.handle("SessionEnd", {**turn, "transcript_path": path}, "myproject") == "", path
        assert caplog.text.count("a transcript outside claude's projects folder was not read") == 2, path
    assert asked == [] and await handoffs.latest("myproject") is None
    for key in ("elsewhere", "linked", "out"):
        assert await transcripts.load({"project_key": key, "session_id": "s-1"}) is None

    inside = conversation(tmp_path)  # claude's projects folder's `project/s-1.jsonl`
    assert await hooks.handle("PreCompact", {**turn, "transcript_path": str(inside)}, "myproject") == ""
    await hooks.handle("SessionEnd", {**turn, "transcript_path": str(inside)}, "myproject")
    letter = await handoffs.latest("myproject")
    assert len(asked) == 1 and "Where is the grue?" in asked[0]
    assert letter is not None and letter.summary.startswith("Letter 1:")
    kept = await transcripts.load({"project_key": "project", "session_id": "s-1"})
    assert [e["uuid"] for e in kept or []] == ["u1", "u2", "u3", "u4"]
