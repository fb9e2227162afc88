"""The game server's tool results: typed, so clients get an output schema for each tool."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from frobozz.games import SaveInfo, Turn


class GameState(BaseModel):
    session_id: str
    text: str = Field(description="What the game said.")
    score: int | None
    max_score: int | None
    moves: int | None
    location: str | None
    done: bool = Field(description="The game has ended (won, or lost for good).")
    won: bool
    recalled: list[str] = Field(
        default_factory=list,
        exclude_if=lambda v: not v,
        description=(
            "Notes from long-term memory about this room or answer, each shown once in a run (play --memory)."
        ),
    )
    note: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description=("A message from the runner that arrived since the last answer (play --memory)."),
    )


class GameEntry(BaseModel):
    name: str
    title: str
    file_name: str
    installed: bool
    license: str | None
    max_score: int | None


class GameList(BaseModel):
    games: list[GameEntry]


class SaveList(BaseModel):
    session_id: str
    saves: list[SaveInfo]


class MapResult(BaseModel):
    session_id: str
    format: Literal["text", "dot", "mermaid"]
    rooms: int
    passages: int
    map: str


class TurnRecord(BaseModel):
    turn: int
    command: str | None
    text: str
    score: int | None
    moves: int | None
    location: str | None


class History(BaseModel):
    session_id: str
    turns: list[TurnRecord]


class EndedGame(BaseModel):
    session_id: str
    turns: int
    score: int | None
    max_score: int | None
    won: bool


class ValidActions(BaseModel):
    session_id: str
    actions: list[str]


def turn_record(turn: Turn) -> TurnRecord:
    return TurnRecord(
        turn=turn.number,
        command=turn.command,
        text=turn.text,
        score=turn.score,
        moves=turn.moves,
        location=turn.location,
    )
