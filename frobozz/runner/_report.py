"""What a run leaves for people: a Markdown transcript (settings first, then turn by turn), and at
the end a summary, a score-over-turns chart and the explored map as images beside it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from frobozz._files import atomic_file
from frobozz.games import GameMap, grid_layout

from ._store import RunStore, TurnRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def start_transcript(store: RunStore) -> None:
    info = asdict(store.info)
    rows = "\n".join(
        f"| {k} | {v} |"
        for k, v in info.items()
        if k
        in (
            "run_id",
            "game",
            "title",
            "player",
            "mode",
            "model",
            "max_turns",
            "max_cost",
            "max_seconds",
            "multi",
            "prompt_file",
            "memory_namespace",
            "created",
        )
    )
    store.transcript.write_text(
        f"# {store.info.title}: run {store.info.run_id}\n\n| setting | value |\n|---|---|\n{rows}\n\n", encoding="utf-8"
    )


def mark_resumed(store: RunStore, turn: int, stopped_by: str) -> None:
    """A resumed run: the summary written when it stopped goes (a new one is written at the end), and the
    transcript says where the run went on."""
    text = store.transcript.read_text(encoding="utf-8") if store.transcript.exists() else ""
    head, found, _ = text.rpartition("## Summary\n")
    if found:
        text = head
    when = datetime.now(UTC).isoformat(timespec="seconds")
    store.transcript.write_text(
        f"{text}## Resumed after turn {turn}\n\n*The run stopped here ({stopped_by}) and went on {when}.*\n\n",
        encoding="utf-8",
    )


def append_turn(store: RunStore, record: TurnRecord) -> None:
    reply = "\n".join(f"> {line}" for line in record.reply.strip().splitlines()) if record.reply.strip() else ""
    status = f"score {record.score} · moves {record.moves} · {record.location}"
    block = (
        f"## Turn {record.turn}: `{record.command}`\n\n{_memory_lines(record)}{reply}\n\n"
        f"```\n{record.text}\n```\n*{status}*\n\n"
    )
    with store.transcript.open("a", encoding="utf-8") as f:
        f.write(block)


def append_kept(store: RunStore, kept: Sequence[str]) -> None:
    """What the run kept for the next run of the game (its lessons, a death)."""
    with store.transcript.open("a", encoding="utf-8") as f:
        f.write("## Kept for the next run\n\n" + ("".join(f"- {k}\n" for k in kept) or "(nothing)\n") + "\n")


def _memory_lines(record: TurnRecord) -> str:
    """What memory did before this reply, so a reader sees why the move was made."""
    lines = ["*A new context window began here (the conversation was compacted).*"] if record.compacted else []
    lines += [f"*Recalled:* {line}" for line in record.recalled]
    lines += [f"*Stored:* {line}" for line in record.stored]
    if record.handoff:
        lines.append("*Hand-off letter:* " + " ".join(record.handoff.split()))
    return "".join(f"{line}\n\n" for line in lines)


def game_map(records: Sequence[TurnRecord], start: str | None = None) -> GameMap:
    """The rooms explored, from `start` (where the game began, before the first command) on."""
    return GameMap.from_path([(None, start), *((r.command, r.location) for r in records)])


_DRAWING = threading.Lock()  # matplotlib promises no thread safety: one run's pictures at a time


def score_text(score: int | None, max_score: int | None) -> str:
    """'42/350'; '-' before the game gave a score (a run that played no turn)."""
    if score is None:
        return "-"
    return f"{score}/{max_score}" if max_score else str(score)


def finish(store: RunStore, records: Sequence[TurnRecord], max_score: int | None, *, start: str | None = None) -> None:
    """Summary, chart and map, written once the run has stopped (for whatever reason). Most of a second of
    CPU for a long run: called in a worker thread, so that a worker's other runs (and its queue's heartbeat)
    go on meanwhile."""
    info = store.info
    summary = (
        f"## Summary\n\n| | |\n|---|---|\n| reason | {info.reason} |\n| score | {score_text(info.score, max_score)} |\n"
        f"| moves | {info.moves} |\n| turns | {info.turns} |\n| won | {info.won} |\n"
        f"| cost | ${info.cost_usd:.4f} |\n| corrections | {info.corrections} |\n"
        + (
            f"| memory | {info.memory_namespace} |\n| memories recalled | {info.memories_recalled} |\n"
            f"| memories stored | {info.memories_stored} |\n| compactions | {info.compactions} |\n"
            f"| hand-offs | {info.handoffs} |\n"
            if info.memory_namespace
            else ""
        )
        + "\n"
        "![score over turns](score.png)\n\n![explored map](map.png)\n"
    )
    with store.transcript.open("a", encoding="utf-8") as f:
        f.write(summary)
    explored = game_map(records, start)
    (store.dir / "map.dot").write_text(explored.to_dot(), encoding="utf-8")
    (store.dir / "map.mmd").write_text(explored.to_mermaid(), encoding="utf-8")
    current = next((r.location for r in reversed(records) if r.location), start)
    with _DRAWING:
        score_chart(records, max_score, store.dir / "score.png", title=f"{info.title}: {info.run_id}")
        map_image(explored, store.dir / "map.png", title=f"{info.title}: explored map", current=current)


def score_chart(records: Sequence[TurnRecord], max_score: int | None, path: Path, *, title: str) -> None:
    from matplotlib.figure import Figure  # (not pyplot: its registry of figures is not safe across threads)

    fig = Figure(figsize=(8, 4), dpi=100)
    ax = fig.subplots()
    ax.plot([r.turn for r in records], [r.score or 0 for r in records], color="#2a7ab0", linewidth=1.8)
    if max_score:
        ax.axhline(max_score, color="#999999", linestyle="--", linewidth=1, label=f"max {max_score}")
        ax.legend(loc="lower right")
    ax.set(title=title, xlabel="turn", ylabel="score")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, path)


def _save(fig: Figure, path: Path) -> None:
    """The picture as a PNG at `path`, whole or not at all (a process killed while it draws leaves the old one)."""
    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png")


_STYLE = {"compass": ("#8a939b", "-"), "vertical": ("#7b5ea7", (0, (5, 3))), "inout": ("#2f7d6b", (0, (1, 2)))}


def map_image(explored: GameMap, path: Path, *, title: str, current: str | None = None) -> None:
    """The explored map, north up (the games part's grid layout, as the web page draws it): each passage's
    direction written where it leaves its room, up/down dashed and in/out dotted, the current room marked."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    grid = grid_layout(explored)
    cell_w, cell_h, box_w, box_h = 1.6, 0.9, 1.3, 0.5
    width, height = max(grid.width, 3), max(grid.height, 2)
    fig = Figure(figsize=(min(60.0, 1.4 + width * cell_w), min(40.0, 1.0 + height * cell_h)), dpi=100)
    ax = fig.subplots()
    place = {room: (x * cell_w, -y * cell_h) for room, (x, y) in grid.places}  # row 0 at the top: north up
    for p in grid.passages:
        color, style = _STYLE[p.kind.value]
        (x1, y1), (x2, y2) = place[p.source], place[p.target]
        if p.stub:  # a line across the map would cross others: a short stub at each end says where it goes
            _stub(ax, (x1, y1), (x2, y2), f"{p.label} → {p.target}", color, style, box_w, box_h)
            _stub(ax, (x2, y2), (x1, y1), f"from {p.source} ({p.label})", color, style, box_w, box_h)
            continue
        ax.plot([x1, x2], [y1, y2], color=color, linestyle=style, linewidth=1.1, zorder=1)
        _edge_label(ax, (x1, y1), (x2, y2), p.label, color, box_w, box_h)
    for room, (x, y) in place.items():
        here = room == current
        ax.add_patch(
            FancyBboxPatch(
                (x - box_w / 2, y - box_h / 2),
                box_w,
                box_h,
                boxstyle="round,pad=0.02",
                facecolor="#ffd27a" if here else "#f7ecc8",
                zorder=2,
                edgecolor="#9a5800" if here else "#b9a56a",
                linewidth=2 if here else 0.8,
            )
        )
        ax.text(
            x,
            y,
            "\n".join(_wrap(room)),
            ha="center",
            va="center",
            fontsize=7,
            zorder=3,
            fontweight="bold" if here else "normal",
        )
    if not grid.places:
        ax.text(0.5, 0.5, "no room seen yet", ha="center", va="center", transform=ax.transAxes, color="#777777")
    else:
        ax.set_xlim(-cell_w / 2 - 0.2, (width - 1) * cell_w + cell_w / 2 + 0.2)
        ax.set_ylim(-(height - 1) * cell_h - cell_h / 2 - 0.1, cell_h / 2 + 0.1)
    ax.set_aspect("equal")
    ax.set_title(title + (f" (now: {current})" if current else "") + "  ·  north up")
    ax.axis("off")
    fig.tight_layout()
    _save(fig, path)


def _edge_label(
    ax, start: tuple[float, float], end: tuple[float, float], text: str, color: str, box_w: float, box_h: float
) -> tuple[float, float]:
    """`text` where the line from `start` to `end` leaves the box at `start`; returns that point."""
    (x1, y1), (x2, y2) = start, end
    dx, dy = x2 - x1, y2 - y1
    scale = min(box_w / 2 / abs(dx) if dx else 1e9, box_h / 2 / abs(dy) if dy else 1e9)
    ax.text(
        x1 + dx * scale,
        y1 + dy * scale,
        f" {text} ",
        fontsize=8,
        color=color,
        zorder=3,
        ha="left" if dx >= 0 else "right",
        va="bottom" if dy >= 0 else "top",
    )
    return x1 + dx * scale, y1 + dy * scale


def _stub(
    ax,
    start: tuple[float, float],
    end: tuple[float, float],
    text: str,
    color: str,
    style: object,
    box_w: float,
    box_h: float,
) -> None:
    """A short line from the box at `start` towards `end`, labelled with where it leads."""
    (x1, y1), (x2, y2) = start, end
    ex, ey = _edge_label(ax, start, end, text, color, box_w, box_h)
    length = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5 or 1.0
    ax.plot(
        [ex, ex + 0.25 * (x2 - x1) / length],
        [ey, ey + 0.25 * (y2 - y1) / length],
        color=color,
        linestyle=style,
        linewidth=1.1,
        zorder=1,
    )


def _wrap(name: str, width: int = 18) -> list[str]:
    """A room's name on lines that fit its box."""
    lines: list[str] = []
    for word in name.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines
