"""What a run leaves for people: a Markdown transcript (settings first, then turn by turn), and at
the end a summary, a score-over-turns chart and the explored map as images beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from frobozz.games import GameMap

from ._store import RunStore, TurnRecord


def start_transcript(store: RunStore) -> None:
    info = asdict(store.info)
    rows = "\n".join(f"| {k} | {v} |" for k, v in info.items()
                     if k in ("run_id", "game", "title", "player", "mode", "model", "max_turns", "max_cost",
                              "max_seconds", "multi", "prompt_file", "memory_namespace", "created"))
    store.transcript.write_text(f"# {store.info.title}: run {store.info.run_id}\n\n| setting | value |\n|---|---|\n"
                                f"{rows}\n\n", encoding="utf-8")


def mark_resumed(store: RunStore, turn: int, stopped_by: str) -> None:
    """A resumed run: the summary written when it stopped goes (a new one is written at the end), and the
    transcript says where the run went on."""
    text = store.transcript.read_text(encoding="utf-8") if store.transcript.exists() else ""
    head, found, _ = text.rpartition("## Summary\n")
    if found:
        text = head
    when = datetime.now(UTC).isoformat(timespec="seconds")
    store.transcript.write_text(f"{text}## Resumed after turn {turn}\n\n*The run stopped here ({stopped_by}) and "
                                f"went on {when}.*\n\n", encoding="utf-8")


def append_turn(store: RunStore, record: TurnRecord) -> None:
    reply = "\n".join(f"> {line}" for line in record.reply.strip().splitlines()) if record.reply.strip() else ""
    status = f"score {record.score} · moves {record.moves} · {record.location}"
    block = (f"## Turn {record.turn}: `{record.command}`\n\n{_memory_lines(record)}{reply}\n\n"
             f"```\n{record.text}\n```\n*{status}*\n\n")
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


def finish(store: RunStore, records: Sequence[TurnRecord], max_score: int | None, *, start: str | None = None) -> None:
    """Summary, chart and map, written once the run has stopped (for whatever reason)."""
    info = store.info
    summary = (f"## Summary\n\n| | |\n|---|---|\n| reason | {info.reason} |\n| score | {info.score}/{max_score} |\n"
               f"| moves | {info.moves} |\n| turns | {info.turns} |\n| won | {info.won} |\n"
               f"| cost | ${info.cost_usd:.4f} |\n| corrections | {info.corrections} |\n"
               + (f"| memory | {info.memory_namespace} |\n| memories recalled | {info.memories_recalled} |\n"
                  f"| memories stored | {info.memories_stored} |\n| compactions | {info.compactions} |\n"
                  f"| hand-offs | {info.handoffs} |\n" if info.memory_namespace else "") + "\n"
               "![score over turns](score.png)\n\n![explored map](map.png)\n")
    with store.transcript.open("a", encoding="utf-8") as f:
        f.write(summary)
    explored = game_map(records, start)
    (store.dir / "map.dot").write_text(explored.to_dot(), encoding="utf-8")
    (store.dir / "map.mmd").write_text(explored.to_mermaid(), encoding="utf-8")
    score_chart(records, max_score, store.dir / "score.png", title=f"{info.title}: {info.run_id}")
    map_image(explored, store.dir / "map.png", title=f"{info.title}: explored map")


def score_chart(records: Sequence[TurnRecord], max_score: int | None, path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.plot([r.turn for r in records], [r.score or 0 for r in records], color="#2a7ab0", linewidth=1.8)
    if max_score:
        ax.axhline(max_score, color="#999999", linestyle="--", linewidth=1, label=f"max {max_score}")
        ax.legend(loc="lower right")
    ax.set(title=title, xlabel="turn", ylabel="score")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def map_image(explored: GameMap, path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(explored.rooms)
    graph.add_edges_from((p.source, p.target) for p in explored.passages)
    size = max(6.0, min(30.0, 1.6 * len(explored.rooms) ** 0.5 * 2))
    fig, ax = plt.subplots(figsize=(size, size * 0.75), dpi=100)
    if explored.rooms:
        layout = nx.spring_layout(graph, seed=1, k=1.5 / max(1, len(explored.rooms)) ** 0.5)
        nx.draw_networkx_nodes(graph, layout, ax=ax, node_size=300, node_color="#f4d58d")
        nx.draw_networkx_edges(graph, layout, ax=ax, arrows=True, arrowsize=8, edge_color="#777777", width=0.8)
        nx.draw_networkx_labels(graph, layout, ax=ax, font_size=7)
    ax.set_title(title)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
