"""`frobozz chat` through a pseudo-terminal (pexpect), offline on the scripted model."""

import io
import os
import re
import shlex
import signal
import subprocess
import sys

import anyio
import pexpect
import pytest

from frobozz.memory import MemoryService
from tests.black_hole import BlackHole
from tests.cli.in_process import frobozz_here
from tests.database import database_name, refusing_connections
from tests.orphans import descendants, still_running


@pytest.fixture
def chat_env(cortex_settings, claude_home, frobozz_env):
    return {
        **os.environ,
        "HOME": str(claude_home),
        "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
        "FROBOZZ_DATA_DIR": str(frobozz_env),
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }


def chat(env, *args, input: str | bytes = "", timeout=180, **kw) -> subprocess.CompletedProcess:
    """`frobozz chat ARGS` run to its end on `input` (with the scripted model, unless it lists)."""
    model = [] if "--list" in args else ["--model", "scripted"]
    return subprocess.run(
        [sys.executable, "-m", "frobozz", "chat", *model, *args],
        input=input,
        capture_output=True,
        text=isinstance(input, str),
        timeout=timeout,
        env=env,
        **kw,
    )


def spawn(env, *args):
    child = pexpect.spawn(
        sys.executable, ["-m", "frobozz", "chat", "--model", "scripted", *args], env=env, encoding="utf-8", timeout=120
    )
    child.expect(r"session ([0-9a-f]{32})")
    return child, child.match.group(1)


def test_two_turns_a_ctrl_c_then_the_list_and_a_resumed_session_that_prints_only_its_new_answer(chat_env):
    """(The resumed chat printing only the new answer was a test of its own: two more chats for one check.)"""
    child, session = spawn(chat_env, "--namespace", "pty")
    child.expect_exact("you> ")
    child.sendline("/help")  # answered by the chat, not sent to the model (which said it is not available)
    child.expect_exact("/compact sums up the conversation")
    child.expect_exact("you> ")
    assert "You said" not in child.before
    child.sendline("The brass lantern is in the attic.")
    child.expect_exact("(scripted) You said: The brass lantern is in the attic.")
    child.expect_exact("you> ")
    child.sendline("Where is the lantern?")
    child.expect_exact("(scripted) You said: Where is the lantern?")
    child.expect_exact("you> ")
    child.sendline("Tell me a long story.")
    child.expect_exact("the story went on,")
    child.sendintr()  # Ctrl-C during a reply: the turn stops, the chat goes on
    child.expect_exact("(interrupted: Ctrl-C again to exit)")
    child.expect_exact("you> ")
    child.sendline("Still there?")
    child.expect_exact("(scripted) You said: Still there?")
    child.expect_exact("you> ")
    child.sendintr()  # Ctrl-C at the prompt: the chat ends, everything already archived
    child.expect_exact("(saved; bye)")
    child.expect(pexpect.EOF)

    listed = pexpect.run(
        f"{sys.executable} -m frobozz chat --list --namespace pty", env=chat_env, encoding="utf-8", timeout=120
    )
    assert session in listed and "The brass lantern is in the attic." in listed

    child, resumed = spawn(chat_env, "--namespace", "pty", "--resume", session)
    assert resumed == session
    child.expect_exact("you> ")
    child.sendline("And now?")
    child.expect_exact("(scripted) You said: And now?")
    answer = child.before.split("And now?", 1)[1]  # after the echo of what was typed
    child.expect_exact("you> ")
    answer += child.before  # a resumed chat prints only the new answer, none of the earlier replies
    for earlier in ("You said: The brass", "You said: Where", "You said: Still", "the story went on"):
        assert earlier not in answer, answer
    child.sendeof()
    child.expect_exact("(saved; bye)")  # Ctrl-D, as /exit and Ctrl-C at the prompt say it
    child.expect(pexpect.EOF)


def test_without_a_logged_in_claude_it_says_how_to_log_in(chat_env):
    done = pexpect.run(
        f"{sys.executable} -m frobozz chat", env=chat_env, encoding="utf-8", timeout=120, withexitstatus=True
    )
    output, status = done
    assert status == 1 and "not logged in" in output and "--model scripted" in output


def test_listing_sessions_of_an_empty_namespace_says_there_are_none(chat_env):
    listed = pexpect.run(
        f"{sys.executable} -m frobozz chat --list --namespace nobody", env=chat_env, encoding="utf-8", timeout=120
    )
    assert "no sessions yet" in listed


def test_a_listing_with_none_in_its_namespace_names_the_namespaces_that_have_some(
    chat_env, cortex_settings, monkeypatch
):
    """The default namespace (`chat`) listed empty while every session was in another one: as if none had been."""

    async def made() -> None:
        service = MemoryService(cortex_settings)
        try:
            for namespace in ("attic", "cellar", "attic", *(f"room{i}" for i in range(10))):
                await (await service.sessions()).open(namespace, client="frobozz chat")
        finally:
            await service.aclose()

    anyio.run(made)
    listed = frobozz_here(chat_env, monkeypatch, "chat", "--list")
    rooms = ", ".join(f"room{i}" for i in reversed(range(10)))  # the most recently active first
    assert f"no sessions in namespace chat; there are some in: {rooms} and 2 more (list them with -n NAME)" in (
        listed.stdout
    )


def test_the_hubs_servers_serve_and_what_the_model_stores_in_one_chat_is_recalled_in_the_next(
    chat_env, cortex_settings
):
    """The servers run in the chat's process: cortex stores in its namespace, and handoff signs its letter with
    the chat's claude session (no CLAUDE_CODE_SESSION_ID tells a server in claude's own process)."""
    child, session = spawn(chat_env, "--namespace", "attic")
    child.expect(r"servers ([a-z, ]+)\)")
    assert sorted(child.match.group(1).split(", ")) == ["cortex", "fetch", "forge", "handoff"]
    child.expect_exact("you> ")
    child.sendline("remember: The brass lantern is in the attic.")
    child.expect_exact("(scripted) Done:")  # the model's cortex store went through the cortex server
    child.expect_exact("you> ")
    child.sendline("hand off: the lantern is found; next, the trap door.")
    child.expect_exact('(scripted) Done: {"handoff_id":')
    child.expect_exact("(scripted) You said: Carry on from the next steps.")  # the new window's first turn
    child.expect_exact("you> ")
    child.sendline("Where were we?")  # answered itself: the relay's two turns had answered the next two lines
    child.expect_exact("(scripted) You said: Where were we?")
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)

    async def signed() -> tuple[str | None, str | None]:
        service = MemoryService(cortex_settings)
        try:
            letter = await (await service.handoffs()).latest("attic")
            record = await (await service.sessions()).get(session)
            return (letter.session_id if letter else None), record.claude_session_id
        finally:
            await service.aclose()

    letter_session, claude_session = anyio.run(signed)
    assert claude_session and letter_session == claude_session

    child, _ = spawn(chat_env, "--namespace", "attic")
    child.expect_exact("you> ")
    child.sendline("Where is the brass lantern?")
    child.expect_exact("(scripted) You said: Where is the brass lantern? — I was reminded of 1 memories.")
    child.expect_exact("you> ")
    child.sendline("exit")  # as a shell or Claude Code's prompt takes it: not a message to the model
    assert child.expect_exact(["(saved; bye)", "You said: exit"]) == 0
    child.expect(pexpect.EOF)


def test_with_the_frobozz_plugin_installed_a_chat_turn_starts_no_plugin_daemon_and_archives_one_session(
    chat_env, cortex_settings, tmp_path
):
    """Chat runs the memory loop around its own claudes: the plugin's hooks ran it again in them (its daemon
    started, and one turn archived the chat, the sidecar's question and the orientation as three more sessions)."""
    from frobozz.plugin import PluginSettings, daemon_pid, stop_daemon

    project = tmp_path / "myproject"
    project.mkdir()
    installed = subprocess.run(
        [sys.executable, "-m", "frobozz", "plugin", "install"],
        env=chat_env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert installed.returncode == 0, installed.stderr
    socket = PluginSettings(data_dir=chat_env["FROBOZZ_DATA_DIR"]).socket
    try:
        done = chat(
            chat_env, "--namespace", "plugged", input="remember: The lamp is in the cellar.\nhello\n", cwd=project
        )
        assert done.returncode == 0 and "(scripted) You said: hello" in done.stdout, done.stderr
        assert daemon_pid(socket) is None

        async def namespaces() -> list[str]:
            service = MemoryService(cortex_settings)
            try:
                return await (await service.sessions()).namespaces()
            finally:
                await service.aclose()

        assert anyio.run(namespaces) == ["plugged"]
    finally:
        stop_daemon(socket)


def test_a_server_that_cannot_be_made_is_named_and_the_chat_goes_on_with_the_others(chat_env):
    """A server's own setting that is wrong (forge's backend) leaves that server out, as one that failed to start
    over stdio did: it ended the chat, after claude had started, once the servers ran in the chat's process."""
    child, _ = spawn({**chat_env, "FROBOZZ_FORGE_BACKEND": "nonesuch"}, "--namespace", "forgeless")
    child.expect(r"servers ([a-z, ]+); not forge: FROBOZZ_FORGE_BACKEND: Input should be .*\(given 'nonesuch'\)")
    assert child.match.group(1).split(", ") == ["cortex", "fetch", "handoff"]
    child.expect_exact("you> ")
    child.sendline("remember: The forge is cold.")
    child.expect_exact("(scripted) Done:")
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)


def test_a_reply_is_streamed_with_its_terminal_sequences_shown_not_obeyed(chat_env):
    """A model echoes what it read (a page, a mail): an OSC sequence in it set the terminal's title (or wrote its
    clipboard); its lines and tabs stay as they are."""
    done = chat(chat_env, "--namespace", "sequences", input="look\x1b]0;pwned\x07 here\tnow\n")
    assert done.returncode == 0, done.stderr
    assert "You said: look\\x1b]0;pwned\\x07 here\tnow" in done.stdout and "\x1b" not in done.stdout


@pytest.mark.parametrize("encoding", [None, "utf-8:strict"], ids=["surrogateescape", "strict locale"])
def test_a_line_that_is_not_utf8_is_answered_and_archived_with_replacement_characters(
    chat_env, cortex_settings, encoding
):
    """Latin-1 typed (or piped): under a C.UTF-8 locale the archive's database refused the lone surrogates and the
    chat ended in a traceback; under a strict one (macOS's en_US.UTF-8) the reader died and the chat hung."""
    env = {**chat_env, **({"PYTHONIOENCODING": encoding} if encoding else {})}
    done = chat(env, "--namespace", "latin", input=b"nul \x00 here\n\xff\xfe caf\xe9\nafter\n")
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert "You said: \ufffd\ufffd caf\ufffd" in done.stdout.decode() and b"You said: after" in done.stdout

    async def archived() -> list[str]:
        service = MemoryService(cortex_settings)
        try:
            sessions = await service.sessions()
            [session] = await sessions.list("latin")
            return [e.content for e in await sessions.transcript(session.id) if e.kind == "user"]
        finally:
            await service.aclose()

    assert anyio.run(archived) == ["nul  here", "\ufffd\ufffd caf\ufffd", "after"]


def test_a_chat_on_the_embedded_postgres_in_a_data_folder_with_a_space_answers_and_remembers(chat_env, tmp_path):
    """macOS's data folder is under `Application Support`: pgserver's unquoted socket folder stopped postgres from
    starting, and the chat ended in pg_ctl's traceback."""
    from frobozz.memory import MemorySettings
    from frobozz.memory._database import stop_embedded

    data = tmp_path / "data 5"
    env = {k: v for k, v in chat_env.items() if k != "FROBOZZ_DATABASE_URL"} | {"FROBOZZ_DATA_DIR": str(data)}
    try:
        for _ in range(2):  # the second on the Postgres the first left running
            done = chat(env, "--namespace", "spaced", input="hello\n")
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
            assert "(scripted) You said: hello" in done.stdout
        listed = chat(env, "--list", "--namespace", "spaced")
        assert listed.stdout.count("hello") == 2, listed.stdout + listed.stderr
    finally:
        stop_embedded(MemorySettings(data_dir=data))


def test_with_the_database_gone_the_chat_answers_on_and_says_each_warning_once_without_a_traceback(
    chat_env, cortex_settings, postgres
):
    """Each turn logged the same seven warnings again, and asyncpg a 25-line traceback at each reconnect it
    tried: some 200 lines over three turns, the replies lost among them."""
    name = database_name(cortex_settings)
    child, _ = spawn(chat_env, "--namespace", "gone")
    child.expect_exact("you> ")
    child.sendline("first")
    child.expect_exact("(scripted) You said: first")
    child.expect_exact("you> ")
    said = ""
    with refusing_connections(postgres, name):
        for line in ("second", "third", "fourth"):
            child.sendline(line)
            child.expect_exact(f"(scripted) You said: {line}")  # the chat goes on without its memory
            said += child.before
            child.expect_exact("you> ")
            said += child.before
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        said += child.before
    assert "Traceback" not in said
    # the seven once, a transcript error a turn, and the repeats held back counted at the exit; before, 7 a turn
    assert 1 <= said.count("WARNING") + said.count("ERROR") <= 12, said
    assert re.search(
        r"WARNING +\d+ repeats of \d+ lines shown above were held back", re.sub(r"\x1b\[[0-9;]*m", "", said)
    )


def test_with_the_database_hung_one_turn_waits_once_then_memory_is_off_remember_says_so_and_it_comes_back(
    chat_env, cortex_settings
):
    """A database that accepts and never answers (its processes stopped): each turn waited out recall, the nudge
    and the archive one after the other (2 + 2 + 10 s), and `remember:` 74 s, every time. Now the first turn that
    finds it silent waits one bound and a probe, says once that memory is off, and the turns after it go at
    claude's speed; `remember:` says at once that nothing was stored; a probe brings memory back.

    What the chat shows of it: the one line, naming the part that waited (the nudge); cortex's store refused as
    memory is off, which the service says without a call to the database; no line of any part after it. Which parts
    start while memory is off (none), a part left out does not say: the loop's test counts them
    (tests/loop/test_session.py)."""
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        child, session = spawn({**chat_env, "FROBOZZ_DATABASE_URL": hole.url}, "--namespace", "hung")
        child.expect_exact("you> ")
        child.sendline("first")
        child.expect_exact("(scripted) You said: first")
        child.expect_exact("you> ")
        hole.hang()
        child.logfile_read = seen = io.StringIO()  # what the chat says while the database hangs
        child.sendline("remember: the lantern is in the cellar")
        child.expect_exact("(scripted) Done: Error executing tool store: memory is off:")
        child.expect_exact("nothing was stored")
        child.expect_exact("you> ")
        remembering = re.sub(r"\x1b\[[0-9;]*m", "", seen.getvalue())
        for line in ("second", "third", "fourth"):
            child.sendline(line)
            child.expect_exact(f"(scripted) You said: {line}")
            child.expect_exact("you> ")
        said = re.sub(r"\x1b\[[0-9;]*m", "", seen.getvalue())
        hole.answer()
        child.expect_exact("memory is back on", timeout=60)  # a probe in the background found it answering
        child.sendline("remember: the lantern is in the attic")
        child.expect_exact('(scripted) Done: {"id":')
        child.expect_exact("you> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)

    async def kept() -> tuple[list[str], list[str]]:
        service = MemoryService(cortex_settings)
        try:
            memories = await (await service.store()).recent(10, "hung")
            entries = await (await service.sessions()).transcript(session)
            return [m.content for m in memories], [e.content for e in entries if e.kind == "user"]
        finally:
            await service.aclose()

    memories, archived = anyio.run(kept)
    # the turn's nudge waited its bound and a probe found no answer either: memory off, said once, naming it
    assert len(re.findall(r"WARNING +memory is off: the database does not answer \(the nudge: slower than", said)) == 1
    # the store the model asked for was refused as memory was off (the service says so without a database call)
    assert "Error executing tool store: memory is off: the database does not answer (the nudge:" in remembering
    assert said.count("WARNING") == 1, said  # nothing else: none of the parts' own lines, in no turn
    assert "Traceback" not in said
    assert memories == ["the lantern is in the attic"]  # nothing of the cellar: the store never began
    assert archived == ["first", "remember: the lantern is in the attic"]  # the silent turns left out, none lost


def test_with_the_database_hung_a_chat_leaves_within_seconds_and_one_started_then_says_so_within_its_bound(
    chat_env, cortex_settings
):
    """Leaving waited out the transcript mirror's stalled write (60 s) and its pool's patience (10 s): 73 s after
    /exit. A chat started on a database that hangs waited asyncpg's 60 s for its first connection. What the chat
    says shows the bounds it keeps now: the mirror's last write given up after 5 s, a pool's connections still
    in use on the database cut after 2 s, the first connection given up after 10 s."""
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        env = {**chat_env, "FROBOZZ_DATABASE_URL": hole.url}
        child, _ = spawn(env, "--namespace", "stuck")
        child.expect_exact("you> ")
        child.sendline("first")
        child.expect_exact("(scripted) You said: first")
        child.expect_exact("you> ")
        hole.hang()
        child.sendline("second")  # its transcript entries reach a store that does not answer
        child.expect_exact("(scripted) You said: second")
        child.expect_exact("you> ")
        child.logfile_read = seen = io.StringIO()  # what the chat says as it leaves
        child.sendline("/exit")
        child.expect(pexpect.EOF)  # (within spawn's timeout: a guard against a hang, not a measure)
        left = re.sub(r"\x1b\[[0-9;]*m", "", seen.getvalue())
        done = chat(env, "--namespace", "stuck")
    # the second turn's transcript entries were still being written: given up after the engine's 5 s, not the
    # store's 60 s; what a pool still had in use on the database, cut after 2 s (the transcripts' bound, a probe's
    # with memory off), not its 10 s patience (a line held back as a repeat is this one word for word)
    assert "the session store was still writing when the engine closed (5 s on)" in left, left
    assert set(re.findall(r"connections in use after (\S+) s", left)) <= {"2"}, left
    assert "Traceback" not in left
    assert done.returncode == 1 and "cannot reach the database: it did not answer within 10 s" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_chat_killed_with_sigkill_leaves_no_process_behind(chat_env):
    child, _ = spawn(chat_env, "--namespace", "killed")
    child.expect_exact("you> ")
    children = descendants(child.pid)
    assert any("claude" in " ".join(p.cmdline()) for p in children)
    os.kill(child.pid, signal.SIGKILL)
    child.expect(pexpect.EOF)
    assert still_running(children, within=5) == []


def test_a_session_resumed_on_another_machine_goes_on_from_the_database_with_its_history(chat_env, tmp_path):
    child, session = spawn(chat_env, "--namespace", "far")
    child.expect_exact("/exit or Ctrl-D leaves")
    child.expect_exact("you> ")
    child.sendline("The brass lantern is in the attic.")
    child.expect_exact("(scripted) You said: The brass lantern is in the attic.")
    child.expect_exact("you> ")
    child.sendline("/exit")
    assert child.expect_exact(["(saved; bye)", "You said: /exit"]) == 0
    child.expect(pexpect.EOF)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # a HOME with no claude transcript in it: the session comes from the database
    child, resumed = spawn({**chat_env, "HOME": str(elsewhere)}, "--resume", session)
    assert resumed == session
    child.expect_exact("you> ")
    child.sendline("What did I say first?")
    child.expect(r"\(scripted\) First you said: [^\r\n]*The brass lantern is in the attic\.")
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)


@pytest.mark.parametrize(
    "args, said",
    [(["--resume", "nosuch"], "no session nosuch"), (["--namespace", "../../etc"], "namespace")],
    ids=["unknown session", "hostile namespace"],
)
def test_an_unknown_session_or_a_refused_namespace_is_an_error_with_status_1_and_starts_nothing(chat_env, args, said):
    output, status = pexpect.run(
        shlex.join([sys.executable, "-m", "frobozz", "chat", "--model", "scripted", *args]),
        env=chat_env,
        encoding="utf-8",
        timeout=120,
        withexitstatus=True,
    )
    assert status == 1 and "error:" in output and said in output and "session " not in output.split("error:")[0]


def test_a_listing_of_a_refused_namespace_or_a_system_prompt_that_is_not_text_is_a_clear_error(
    chat_env, tmp_path, monkeypatch
):
    """Both were tracebacks. In this process (`frobozz_here`): the point is the message, not the process."""
    for namespace in ("../../etc", ""):
        listed = frobozz_here(chat_env, monkeypatch, "chat", "--list", "--namespace", namespace, code=1)
        assert "error:" in listed.stderr and "namespace" in listed.stderr
    latin1 = tmp_path / "system.txt"
    latin1.write_bytes(b"Tu es un caf\xe9.")
    refused = frobozz_here(
        chat_env, monkeypatch, "chat", "--model", "scripted", "--system-prompt-file", str(latin1), code=2
    )
    assert f"{latin1} cannot be read" in " ".join(refused.stderr.split())


@pytest.mark.parametrize("given, said", [("nonexistent", "does not exist"), ("notes.md", "is a file")])
def test_a_context_dir_that_is_not_a_folder_is_refused_before_anything_starts(
    chat_env, tmp_path, monkeypatch, given, said
):
    """One that was not there was left out without a word, while a missing --system-prompt-file was refused."""
    (tmp_path / "notes.md").write_text("---\nautoload: all\n---\nA file, not a folder.", encoding="utf-8")
    folder = str(tmp_path / given)
    refused = frobozz_here(chat_env, monkeypatch, "chat", "--model", "scripted", "--context-dir", folder, code=2)
    stderr = " ".join(refused.stderr.split())
    assert "--context-dir" in stderr and said in stderr and "session " not in refused.output


def test_a_listed_session_shows_its_whole_id_and_its_first_words_as_they_were_said(
    chat_env, cortex_settings, monkeypatch
):
    """'[/x]' in a first message ended the listing in a markup error; an ESC sequence went to the terminal; at 80
    columns the id was cut."""
    import anyio

    from frobozz.cli import _chat
    from frobozz.memory import MemoryService

    async def said() -> str:
        service = MemoryService(cortex_settings)
        try:
            sessions = await service.sessions()
            session = await sessions.open("chat")
            await sessions.archive(session.id, 1, "user", "arr[0] [/x] \x1b[2Jgone, and words enough to fill a preview")
            return session.id
        finally:
            await service.aclose()

    session_id = anyio.run(said)
    monkeypatch.setattr(_chat.out, "width", 200)  # the command's console (made at import): no cell folded
    listed = frobozz_here(chat_env, monkeypatch, "chat", "--list").stdout
    assert "arr[0] [/x] \\x1b[2Jgone" in listed and "\x1b" not in listed
    monkeypatch.setattr(_chat.out, "width", 80)  # (the command's console, made at import)
    narrow = frobozz_here(chat_env, monkeypatch, "chat", "--list").stdout
    assert session_id in narrow  # whole, to copy into --resume


@pytest.mark.parametrize(
    "args, said",
    [
        (["--namespace", "bad/ns"], "invalid namespace 'bad/ns'"),
        (["--resume", "nope"], "no session nope: `frobozz chat --list` shows the ones there are"),
    ],
    ids=["refused namespace", "unknown session"],
)
def test_a_chat_refused_before_it_began_leaves_no_embedded_postgres_running_nor_says_it_stays(
    chat_env, frobozz_env, args, said
):
    """Both left the embedded Postgres they had started running, and said it "stays running"."""
    from frobozz._pgguard import postmaster_running

    env = {key: value for key, value in chat_env.items() if key != "FROBOZZ_DATABASE_URL"}  # the embedded one
    done = chat(env, *args)
    stderr = " ".join(done.stderr.split())
    assert done.returncode == 1 and f"error: {said}" in stderr and "Traceback" not in stderr, done.stderr
    assert "stays running" not in stderr
    assert not postmaster_running(frobozz_env / "postgres")


def test_a_listing_given_a_session_to_resume_is_refused_as_a_usage_error(chat_env, monkeypatch):
    """`--list --resume ID` listed, and passed over --resume without a word."""
    refused = frobozz_here(chat_env, monkeypatch, "chat", "--list", "--resume", "x", code=2)
    stderr = " ".join(refused.stderr.split())
    assert "--resume" in stderr and "--list lists the sessions" in stderr
