"""`frobozz chat`: a terminal chat on the memory loop, the reply streamed as it arrives, with the hub's
MCP servers attached (cortex, fetch, forge, handoff, served in this process) and the hand-off relay on.
Ctrl-C interrupts the turn; a second Ctrl-C (or one at the prompt) exits, everything already archived."""

from __future__ import annotations

import asyncio
import io
import math
import signal
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import typer
from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from frobozz import _spans
from frobozz._text import printable, printable_stream

from ._database import say_postgres_stays
from ._output import cell, err
from ._trace import start_tracing, trace_option

out = Console(highlight=False)
SERVERS = ["cortex", "fetch", "forge", "handoff"]
PROMPT = "you> "
LEAVE = {"/exit", "/quit", "exit", "quit"}  # as Claude Code's own prompt and a shell take them: never sent on
HELP = {"/help", "/?"}  # answered here: claude in this mode answered that /help is not available
HELP_TEXT = (
    "/exit, /quit or Ctrl-D leaves (the session is kept: `frobozz chat --resume SESSION` goes on with it); "
    "Ctrl-C interrupts a reply; /compact sums up the conversation so far to free the context; "
    "everything else goes to the model."
)
BYE = "(saved; bye)"  # however the chat is left


def scripted_reply(request: Any) -> Any:
    """The offline stand-in for claude (`--model scripted`): it answers the sidecar's questions, stores
    what it is told to (`remember: …`) with cortex as claude would, writes a letter (`hand off: …`) with
    handoff, says what came first in the conversation when asked, and otherwise says what it was told and
    how many memories came with it."""
    text = request.last_user_text()
    said = text.rsplit("\n", 1)[-1]
    if request.tool_results():
        return f"(scripted) Done: {str(request.tool_results()[0].get('content'))[:200]}"
    if text.startswith("Write up to"):
        return text.rsplit("\n", 1)[-1][:200]
    if text.startswith("Here is the last exchange"):
        return "NONE"
    if text.startswith("Summarise this conversation"):
        return "(scripted) An earlier chat."
    if said.lower().startswith("hand off:"):  # a letter to the next context window, with handoff
        from frobozz.engine.scripted import Reply, ToolUse

        return Reply((ToolUse("mcp__handoff__handoff", {"summary": said.split(":", 1)[1].strip()}),))
    if said.lower().startswith("remember:"):  # the model stores it with cortex, as claude would
        from frobozz.engine.scripted import Reply, ToolUse

        return Reply((ToolUse("mcp__cortex__store", {"content": said.split(":", 1)[1].strip()}),))
    if "story" in said.lower():  # a long reply, streamed slowly: something to interrupt with Ctrl-C
        from frobozz.engine.scripted import Reply, Text

        return Reply((Text("(scripted) Once upon a time, " + "the story went on, " * 400 + "the end."),), delay=0.02)
    if said.lower().startswith("what did i say first"):  # the conversation's history reached the model
        from frobozz.engine import text_of

        first = text_of(request.messages[0].get("content")).strip().rsplit("\n", 1)[-1]
        return f"(scripted) First you said: {first}"
    recalled = text.count("[memory ")
    return f"(scripted) You said: {said}" + (f" — I was reminded of {recalled} memories." if recalled else "")


def _why(error: Exception) -> str:
    """A server's failure in one line: the variable to fix, for a setting (as a command's own error says it)."""
    from ._app import _settings_error  # (here: _app imports this module)

    return _settings_error(error) or f"{type(error).__name__}: {next(iter(str(error).splitlines()), '')}"


def _stdin_lines() -> MemoryObjectReceiveStream[str]:
    """Standard input's lines, read by a daemon thread: a reader blocked at the prompt never keeps
    the program from exiting."""
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    loop = asyncio.get_running_loop()
    if isinstance(sys.stdin, io.TextIOWrapper):  # a byte not in the terminal's encoding (Latin-1 typed) is U+FFFD:
        sys.stdin.reconfigure(errors="replace")  # under a strict locale (macOS's) the reader died and the chat hung

    def read() -> None:
        try:
            for line in sys.stdin:
                loop.call_soon_threadsafe(send.send_nowait, line)
        finally:  # however it ends, the chat sees the end of its input (it waited for ever after an error)
            loop.call_soon_threadsafe(send.close)

    threading.Thread(target=read, name="chat-stdin", daemon=True).start()
    return receive


def _sessions_table(namespace: str | None) -> None:
    from frobozz.memory import MemoryService, MemorySettings, MemoryStoreError, stop_embedded_at_exit

    stop_embedded_at_exit()  # a listing is one command: a Postgres it starts does not outlive it

    async def main() -> tuple[list, list[str]]:
        service = MemoryService(MemorySettings())
        try:
            sessions = await service.sessions()
            found = await sessions.list(namespace)
            # none here: the namespaces that have some, which a chat in another one (-n) made
            return found, [] if found or namespace is None else await sessions.namespaces()
        finally:
            await service.aclose()

    try:
        found, elsewhere = anyio.run(main)
    except MemoryStoreError as e:  # a namespace refused, the database gone (a traceback before)
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(1) from None
    if not found and elsewhere:
        names = ", ".join(printable(name) for name in elsewhere[:10]) + (
            f" and {len(elsewhere) - 10} more" if len(elsewhere) > 10 else ""
        )
        out.print(
            f"no sessions in namespace {namespace}; there are some in: {names} (list them with -n NAME)",
            markup=False,
            soft_wrap=True,
        )
        return
    if not found:
        out.print("no sessions yet")
        return
    # the id whole, at any width: it is what --resume takes (cut at 80 columns before)
    table = Table(Column("id", no_wrap=True, min_width=32), "namespace", "created", "last activity", "preview")
    for s in found:
        table.add_row(
            s.id,
            s.namespace,
            f"{s.created_at:%Y-%m-%d %H:%M}",
            f"{s.last_active_at:%Y-%m-%d %H:%M}",
            cell(s.preview[:60]),  # what was said, as it was said
        )
    out.print(table)


def chat(
    namespace: str = typer.Option("chat", "--namespace", "-n", help="Whose memory: sessions, recall and archive."),
    system_prompt_file: Path | None = typer.Option(
        None, exists=True, dir_okay=False, help="The session's fixed identity (a system prompt)."
    ),
    context_dir: list[Path] = typer.Option(
        [], "--context-dir", exists=True, file_okay=False, help="Markdown files with front matter (autoload)."
    ),  # (one that is not there was left out without a word)
    resume: str | None = typer.Option(None, help="Take up a past session (see --list)."),
    list_sessions: bool = typer.Option(False, "--list", help="List past sessions and exit."),
    no_recall: bool = typer.Option(False, "--no-recall", help="Do not recall memories before each turn."),
    no_suggest: bool = typer.Option(False, "--no-suggest", help="Do not suggest facts to remember."),
    model: str | None = typer.Option(
        None, help="claude's model; `scripted` runs offline on the project's scripted model."
    ),
    trace: bool = trace_option(),
) -> None:
    """Chat with claude, with long-term memory around every turn."""
    from frobozz.memory import MemorySettings, MemoryStoreError, check_namespace, embedded_users

    if list_sessions and resume is not None:  # (--resume was passed over without a word)
        raise typer.BadParameter("--list lists the sessions; take one up without --list", param_hint="--resume")
    try:  # before anything starts (a refused one left the embedded Postgres it had started running)
        check_namespace(namespace)
    except MemoryStoreError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(1) from None
    settings = MemorySettings()  # (a bad one: said, naming its variable, before anything starts)
    start_tracing(trace, "frobozz-chat")
    if list_sessions:
        _sessions_table(namespace)
        return
    if model != "scripted":
        from frobozz.runner import claude_readiness

        problem = claude_readiness()
        if problem:
            err.print(f"[red]error:[/red] {escape(problem.replace('--player walkthrough', '--model scripted'))}")
            raise typer.Exit(1)
    try:
        system = system_prompt_file.read_text(encoding="utf-8") if system_prompt_file else None
    except (OSError, UnicodeDecodeError) as e:  # (a traceback before)
        raise typer.BadParameter(
            f"{system_prompt_file} cannot be read: {e}", param_hint="--system-prompt-file"
        ) from None
    running = settings.database_url is not None or embedded_users(settings) is not None
    began: list[bool] = []  # the chat began: its session is open
    try:
        anyio.run(_chat, namespace, system, context_dir, resume, not no_recall, not no_suggest, model, began)
    except KeyboardInterrupt:
        pass
    finally:
        if began or running:  # the sessions, archive and memory are in it, for the next chat (after an error too)
            say_postgres_stays(err)
        else:  # refused before it began (an unknown session): an embedded Postgres it started goes with it
            _stop_started_postgres(settings)


def _stop_started_postgres(settings: Any) -> None:
    """Stop the embedded Postgres this process started, unless another process has taken it up meanwhile (as a
    one-shot command's does at its exit)."""
    from frobozz.memory import stop_embedded

    stop_embedded(settings)  # (this process's handle: stopped only when it is the last one on pgserver's list)


async def _chat(
    namespace: str,
    system: str | None,
    context_dirs: list[Path],
    resume: str | None,
    recall: bool,
    suggest: bool,
    model: str | None,
    began: list[bool],
) -> None:
    from frobozz.engine import AssistantMessage, EngineOptions, Result, StreamEvent
    from frobozz.engine.observers import HandoffRelay, handoff_span
    from frobozz.engine.scripted import ScriptedModel
    from frobozz.loop import MemorySession, capsules, context_files, here_and_now, latest_letter, memories
    from frobozz.memory import MemoryService, MemorySettings, MemoryStoreError, TranscriptStore
    from frobozz.servers import load_server

    def providers(store, sessions, handoffs):
        return [
            context_files(*context_dirs),
            here_and_now("frobozz chat"),
            latest_letter(handoffs),
            capsules(sessions),
            memories(store, sessions),
        ]

    async def run(env: dict[str, str]) -> None:
        """The chat on the hub's servers, whose memory defaults to the session's namespace (what the model
        stores is what recall finds); the sidecar (quick stateless asks) runs bare: no MCP servers, no tools."""
        relay = HandoffRelay()
        service = MemoryService(MemorySettings())
        transcripts = None
        try:
            transcripts = await TranscriptStore.open(size=2)  # claude's sessions, resumable from any machine
            try:
                ns = (await (await service.sessions()).get(resume)).namespace if resume else namespace
            except MemoryStoreError as e:
                if not str(e).startswith("no session "):  # an id that cannot be one, the database gone
                    raise
                raise MemoryStoreError(f"no session {resume}: `frobozz chat --list` shows the ones there are") from e
            served: list[MemorySession] = []  # the chat, once it has started: which claude session is served
            servers = {  # in this process: no four Python processes to wait for before the first prompt
                name: partial(
                    load_server,
                    name,
                    service=service,
                    session=lambda: served[0].pool.primary.session_id if served else None,
                    cortex_default_namespace=ns,
                )
                for name in SERVERS
            }
            options = EngineOptions(
                model=claude_model,
                env=env,  # (the loop starts its claudes with the Frobozz plugin's hooks off: `claude_options`)
                system_prompt=system,
                in_process_servers=servers,
                session_store=transcripts,
                session_project="frobozz-chat",
                strict_mcp_config=True,
                include_partial_messages=True,
                allowed_tools=[f"mcp__{name}" for name in SERVERS],
                trace_attributes={_spans.SESSION_KIND: "chat", _spans.MEMORY_NAMESPACE: ns},
            )
            sidecar = EngineOptions(
                model=claude_model,
                env=env,
                tools=(),
                strict_mcp_config=True,  # (a plugin's MCP server started its daemon)
                trace_attributes={_spans.SESSION_KIND: "sidecar"},
            )
            async with MemorySession(
                options,
                service,
                namespace=ns,
                client="frobozz chat",
                resume=resume,
                sidecar=sidecar,
                providers=providers,
                recall=recall,
                suggest=suggest,
                # (the relay reads the events `answer` reads, in order, and its steps are taken between the user's
                # turns: as an observer, on its own task, it could see a turn's end after the chat had gone on)
            ) as loop:
                served.append(loop)
                began.append(True)
                failed = loop.pool.primary.engine.in_process_failed  # (a setting of its own that is wrong)
                serving = ", ".join(name for name in servers if name not in failed) or "none"
                serving += "".join(f"; not {name}: {_why(e)}" for name, e in failed.items())
                err.print(
                    f"session {loop.id} (namespace {loop.record.namespace}; servers {serving}); "
                    "Ctrl-C interrupts a reply; /exit or Ctrl-D leaves",
                    markup=False,
                )
                await converse(loop, relay)
        except MemoryStoreError as e:  # an unknown session, a namespace refused, the database gone
            err.print(f"[red]error:[/red] {escape(str(e))}")  # the error may quote what was given
            raise typer.Exit(1) from None
        finally:  # side by side: each may wait on a database that hangs (the engine has closed)
            async with anyio.create_task_group() as closing:
                if transcripts is not None:
                    closing.start_soon(partial(transcripts.aclose, timeout=2.0))
                closing.start_soon(service.aclose)

    async def converse(loop: MemorySession, relay: HandoffRelay) -> None:
        turn_running = False
        interrupts = 0
        async with anyio.create_task_group() as tg:

            async def on_signals() -> None:
                nonlocal interrupts
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        interrupts += 1
                        if turn_running and interrupts == 1:
                            err.print("\n(interrupted: Ctrl-C again to exit)", markup=False)
                            await loop.pool.primary.interrupt()
                        else:
                            err.print(f"\n{BYE}", markup=False)
                            tg.cancel_scope.cancel()

            tg.start_soon(on_signals)
            lines = _stdin_lines()
            while True:
                sys.stdout.write(PROMPT)
                sys.stdout.flush()
                try:
                    line = await lines.receive()
                except anyio.EndOfStream:  # Ctrl-D
                    err.print(BYE, markup=False)
                    break
                if not line.strip():
                    continue
                if line.strip().lower() in LEAVE:
                    err.print(BYE, markup=False)
                    break
                if line.strip().lower() in HELP:
                    err.print(HELP_TEXT, markup=False)
                    continue
                turn_running, interrupts = True, 0
                await loop.send(line.rstrip("\n"))
                await answer(loop, relay)
                while steps := relay.steps():  # a letter was written: the relay's turns, in order, before the
                    for step in steps:  # next prompt (sent on their own, they answered the next two lines)
                        with handoff_span(step, loop.pool.primary.engine.trace.prepare_turn()):
                            for message in relay.messages(step):  # the compaction, then the new window's first
                                await loop.pool.primary.send(message)
                                await answer(loop, relay, shown=not message.startswith("/"))
                turn_running = False
            tg.cancel_scope.cancel()

    async def answer(loop: MemorySession, relay: HandoffRelay, *, shown: bool = True) -> None:
        """One turn's reply, streamed as it comes (`shown=False`: read, not printed), up to its result; the relay
        sees each event before the next is read."""
        streamed = False
        async for event in loop.events():
            relay.on_event(event)
            if event.is_replay:  # a resumed session's history: said before, not this turn's answer
                continue
            if isinstance(event, StreamEvent) and event.text_delta and shown:
                sys.stdout.write(printable_stream(event.text_delta))
                sys.stdout.flush()
                streamed = True
            elif isinstance(event, AssistantMessage) and not streamed and event.text and shown:
                sys.stdout.write(printable_stream(event.text))
            elif isinstance(event, Result):
                if event.is_error and event.result:
                    err.print(f"[red]{escape(str(event.result))}[/red]")
                break
        if shown:
            sys.stdout.write("\n")

    claude_model = None if model == "scripted" else model
    if model == "scripted":
        async with ScriptedModel(scripted_reply) as scripted:
            await run(scripted.env())
    else:
        await run({})
