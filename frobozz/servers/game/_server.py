"""The `game` MCP server: play Z-machine games through tools, several sessions at once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from frobozz._mailbox import Mailbox
from frobozz.games import GameError, GameSession, SaveInfo, Turn

from .._complete import offer_completion
from .._logs import offer_logging
from .._tools import hints, tool_errors
from ._models import (
    EndedGame,
    GameEntry,
    GameList,
    GameState,
    History,
    MapResult,
    SaveList,
    ValidActions,
    turn_record,
)
from ._move_recall import MoveRecall
from ._sessions import Sessions
from .settings import Settings

if TYPE_CHECKING:
    from frobozz.memory import MemoryService

INSTRUCTIONS = """Play interactive fiction (Z-machine games such as Zork I).
Start with new_game, then send one command per act call ('north', 'take lamp', 'open mailbox').
look and inventory do not use up a move. undo goes back; save/restore keep named slots that
survive restarts. In-game 'save', 'restore' and 'restart' typed into act are handled the same way."""

SessionId = Annotated[str, Field(description="The session_id that new_game returned.", max_length=200)]
Slot = Annotated[str, Field(description="Save slot name: letters, digits, '-' or '_'.", max_length=200)]
GameName = Annotated[str, Field(description="A catalogue name ('zork1') or a story file name.", max_length=1000)]


def create_server(settings: Settings | None = None, *, service: MemoryService | None = None) -> MCPServer:
    """`service`: for the recall after each act (`Settings.recalls`), one shared with other servers in the process
    (`MemoryService.sharing`), else it opens its own."""
    settings = settings or Settings()
    sessions = Sessions(settings)
    recall = MoveRecall(settings, service)
    mailbox = Mailbox(settings.game_mailbox) if settings.game_mailbox else None

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(recall.start)  # the database and the embedding model, before the first act needs them
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            await sessions.aclose()
            await recall.aclose()

    def _state(session: GameSession, turn: Turn, recalled: list[str] | None = None) -> GameState:
        """A game answer, with the runner's notes waiting in the mailbox (play --memory in tools mode)."""
        note = "\n\n".join(mailbox.take()) if mailbox else ""
        return GameState(
            session_id=session.id,
            text=turn.text,
            score=turn.score,
            max_score=session.max_score,
            moves=turn.moves,
            location=turn.location,
            done=turn.done,
            won=turn.won,
            recalled=recalled or [],
            note=note or None,
        )

    @contextmanager
    def _unpaused() -> Iterator[None]:
        """A move, refused while the runner has paused the game; marked under way for a runner that waits, once
        it has paused, for the moves that started before its pause."""
        if mailbox is None:
            yield
            return
        with mailbox.move() as reason:
            if reason:
                raise ToolError(f"{reason} (nothing was done)")
            yield

    server = MCPServer("frobozz-game", title="Frobozz games", instructions=INSTRUCTIONS, lifespan=lifespan)
    reading = dict(read_only=True, idempotent=True)

    @server.tool(annotations=hints("List games", **reading))
    def list_games() -> GameList:
        """The games that can be started: catalogued ones (installed or not) and any story file found."""
        with tool_errors(GameError, OSError):
            return GameList(
                games=[
                    GameEntry(
                        name=g.name,
                        title=g.title,
                        file_name=g.file_name,
                        installed=g.installed,
                        license=g.license,
                        max_score=g.max_score,
                    )
                    for g in sessions.library.listing()
                ]
            )

    @server.tool(annotations=hints("Start a game", read_only=False))
    async def new_game(
        game: Annotated[
            str,
            Field(
                description="A catalogue name ('zork1') or a story file name ('zork1-r119.z3', 'mygame.z8').",
                max_length=1000,
            ),
        ],
    ) -> GameState:
        """Start a new game session and return the game's opening text."""
        with tool_errors(GameError):
            session = await sessions.open(game)
            return _state(session, session.current)

    @server.tool(annotations=hints("Give a command", read_only=False))
    async def act(
        session_id: SessionId,
        command: Annotated[str, Field(description="One command, as a player would type it: 'north', 'take lamp'.")],
    ) -> GameState:
        """Send one command to the game and return its answer."""
        with _unpaused(), tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                turn = await session.act(command)
                await sessions.changed(session)
                if settings.autosave_slot:  # so a runner can pick the game up again after a crash
                    await session.save(settings.autosave_slot)
            return _state(session, turn, await recall(turn.location, turn.text))

    @server.tool(annotations=hints("Look around", **reading))
    async def look(session_id: SessionId) -> GameState:
        """Describe the current location without using up a move."""
        with tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                return _state(session, await session.peek("look"))

    @server.tool(annotations=hints("Inventory", **reading))
    async def inventory(session_id: SessionId) -> GameState:
        """List what the player carries, without using up a move."""
        with tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                return _state(session, await session.peek("inventory"))

    @server.tool(annotations=hints("Undo", read_only=False, destructive=True))
    async def undo(session_id: SessionId, steps: Annotated[int, Field(ge=1, le=10_000)] = 1) -> GameState:
        """Take back the last `steps` turns."""
        with _unpaused(), tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                turn = await session.undo(steps)
                await sessions.changed(session)
                return _state(session, turn)

    @server.tool(annotations=hints("Save", read_only=False, destructive=True, idempotent=True))
    async def save(session_id: SessionId, slot: Slot) -> SaveInfo:
        """Save the game in a named slot (an existing slot of that name is replaced)."""
        with tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                return await session.save(slot)

    @server.tool(annotations=hints("Restore", read_only=False, destructive=True, idempotent=True))
    async def restore(session_id: SessionId, slot: Slot) -> GameState:
        """Put the game back to a saved slot (saves survive server restarts)."""
        with _unpaused(), tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                turn = await session.restore(slot)
                await sessions.changed(session)
                return _state(session, turn)

    @server.tool(annotations=hints("List saves", **reading))
    async def list_saves(session_id: SessionId) -> SaveList:
        """The save slots of this session's game."""
        with tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                return SaveList(session_id=session.id, saves=session.list_saves())

    @server.tool(annotations=hints("Map", **reading))
    async def map(session_id: SessionId, format: Literal["text", "dot", "mermaid"] = "text") -> MapResult:
        """The rooms visited and the commands that connected them, as text, Graphviz DOT or Mermaid."""
        with tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                game_map = session.map()
            return MapResult(
                session_id=session_id,
                format=format,
                rooms=len(game_map.rooms),
                passages=len(game_map.passages),
                map=game_map.render(format),
            )

    @server.tool(annotations=hints("History", **reading))
    async def history(session_id: SessionId, last: Annotated[int, Field(ge=1, le=10_000)] = 20) -> History:
        """The last turns played: command, answer and status after each."""
        with tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                return History(session_id=session.id, turns=[turn_record(t) for t in session.history(last)])

    @server.tool(annotations=hints("Valid actions", **reading))
    async def valid_actions(session_id: SessionId) -> ValidActions:
        """Commands that would change the game here (only for games jericho knows; may take a second)."""
        with tool_errors(GameError):
            async with sessions.hold(session_id) as session:
                return ValidActions(session_id=session.id, actions=await session.valid_actions())

    @server.tool(annotations=hints("End game", read_only=False, destructive=True))
    async def end_game(session_id: SessionId) -> EndedGame:
        """End the session and stop its interpreter (save first to keep the game)."""
        with tool_errors(GameError):
            session = await sessions.end(session_id)
            turn = session.current
            return EndedGame(
                session_id=session.id, turns=turn.number, score=turn.score, max_score=session.max_score, won=turn.won
            )

    @server.prompt(title="Play a game")
    def play(game: GameName) -> str:
        """Start a game and play it (the game's name completes from the games there are)."""
        return (
            f"Start a new game of {game!r} with new_game, then play it: read each answer, and send one "
            "command at a time with act. Save before anything risky."
        )

    @server.prompt(title="Go back to a save")
    def restore_save(game: GameName, slot: Slot) -> str:
        """Take a game up again from a save slot (the slot completes from the game's saves)."""
        return (
            f"Take up the game of {game!r} from the save slot {slot!r}: in a session of that game (start one "
            "with new_game if there is none), restore the slot, then look around and go on playing."
        )

    async def games(typed: str, _: object) -> list[str]:
        listing = sessions.library.listing()
        return [g.name for g in listing] + [g.file_name for g in listing]

    async def slots(typed: str, given: Mapping[str, str]) -> list[str]:
        return sessions.library.save_slots(given["game"]) if given.get("game") else []

    offer_completion(
        server,
        {("play", "game"): games, ("restore_save", "game"): games, ("restore_save", "slot"): slots},
        expected=(GameError, OSError),
    )
    offer_logging(server)
    return server
