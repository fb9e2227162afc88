"""`frobozz cortex …`: the memory store from the command line, with JSONL import/export and reembed."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from frobozz._files import atomic_file

from ._output import cell, err

cortex = typer.Typer(
    help="Long-term memory: store, search, recent, get, supersede, forget, import, export, reembed.",
    no_args_is_help=True,
)
out = Console()
T = TypeVar("T")
MEMORY_ID = typer.Argument(..., min=1, max=2**63 - 1, help="A memory's id (Postgres bigint).")


def _run(work: Callable[[Any], Awaitable[T]], *, check_model: bool = True) -> T:
    """Open the store (the configured database, or the embedded one), run `work`, close; errors plainly."""
    from frobozz.memory import MemoryService, MemorySettings, MemoryStoreError, stop_embedded_at_exit

    stop_embedded_at_exit()  # one command: a Postgres it starts does not outlive it

    async def main() -> T:
        opened = MemoryService(MemorySettings())
        try:
            return await work(await opened.store(check_model=check_model))
        finally:
            await opened.aclose()

    try:
        return anyio.run(main)
    except MemoryStoreError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")  # the error may quote what was given
        raise typer.Exit(1) from None


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )


NAMESPACE_HELP = (
    "Whose memories: a namespace (letters, digits, '_', '.', ':', '-', starting with a letter or digit); default "
    "FROBOZZ_CORTEX_DEFAULT_NAMESPACE."
)


def _print(rows: list[dict[str, Any]], as_json: bool, columns: tuple[str, ...]) -> None:
    if as_json:
        out.print_json(json.dumps(rows, default=str))
        return
    table = Table(*columns)
    for row in rows:
        # a memory's words as they are: "[/x]" is no markup (it ended the listing in a traceback) and an ESC
        # sequence from mail or a feed does not reach the terminal
        table.add_row(*(cell(str(row.get(c, ""))[:200], lines=True) for c in columns))
    out.print(table)


@cortex.command("store")
def store_cmd(
    content: str,
    namespace: str = typer.Option(None, help=NAMESPACE_HELP),
    metadata: str = typer.Option(None, help="JSON."),
    image: Path | None = typer.Option(
        None,
        exists=True,  # (a usage error, as a bad --metadata is: it was said as the store's, status 1)
        dir_okay=False,
        help="An image to keep with it (PNG, JPEG, GIF "
        "or WebP): a thumbnail, and a description when FROBOZZ_CORTEX_VISION_MODEL is set.",
    ),
) -> None:
    """Remember CONTENT (with an image: --image)."""
    try:
        meta = json.loads(metadata) if metadata else None
    except ValueError as e:
        raise typer.BadParameter(f"not JSON: {e}", param_hint="--metadata") from None
    if meta is not None and not isinstance(meta, dict):
        raise typer.BadParameter('a JSON object, like {"source": "notes"}', param_hint="--metadata")

    async def work(store):
        if image is not None:  # the user's own file: its folder is allowed, as the server's folders are for it
            from frobozz.memory import ImageInput, ImageStore, MemorySettings

            folder = await anyio.to_thread.run_sync(lambda: image.expanduser().resolve().parent)
            images = ImageStore(store, MemorySettings(), folders=[folder])
            return (await images.remember(content, ImageInput(path=str(image)), meta, namespace, source="cli"))[:2]
        return await store.store(content, meta, namespace, source="cli")

    memory, duplicate = _run(work)
    out.print(f"stored {memory.id}" if duplicate is None else f"already stored as {duplicate}")


def _aware(moment: datetime | None) -> datetime | None:
    """A time given without a zone is the local time."""
    return moment.astimezone() if moment is not None and moment.tzinfo is None else moment


@cortex.command("search")
def search_cmd(
    query: str,
    limit: int = typer.Option(10, min=1, max=200),
    mode: str = typer.Option("hybrid"),
    namespace: str = typer.Option(None, help=NAMESPACE_HELP),
    as_json: bool = typer.Option(False, "--json"),
    min_score: float = typer.Option(
        0.0,
        min=0.0,
        max=1.0,
        help="Leave out results scoring under this "
        "(scores are absolute, in [0, 1]; 0.3 keeps what is likely relevant).",
    ),
    since: datetime | None = typer.Option(None, help="Only memories stored at or after this time."),
    until: datetime | None = typer.Option(None, help="Only memories stored before this time."),
    history: bool = typer.Option(False, "--history", help="Superseded memories too (facts that changed)."),
) -> None:
    """Memories matching QUERY (hybrid, semantic or keyword); each score in [0, 1] means the same for every query."""
    if mode not in ("hybrid", "semantic", "keyword"):
        raise typer.BadParameter("use hybrid, semantic or keyword", param_hint="--mode")
    since, until = _aware(since), _aware(until)
    if since is not None and until is not None and since >= until:  # (it found nothing, said as if none matched)
        raise typer.BadParameter(
            f"{since.isoformat(sep=' ')} is not before --until {until.isoformat(sep=' ')}: nothing is in between",
            param_hint="--since",
        )

    async def work(store):
        return await store.search(
            query,
            limit=limit,
            namespace=namespace,
            mode=mode,
            min_score=min_score,
            since=since,
            until=until,
            include_history=history,
        )

    hits = _run(work)
    if not hits and not as_json:
        out.print("no memories found" + (f" scoring {min_score} or more" if min_score else ""))
        return
    _print(
        [
            {
                "id": h.memory.id,
                "score": round(h.score, 4),
                "created_at": h.memory.created_at.isoformat(timespec="seconds"),
                "content": h.memory.content,
            }
            | (
                {"valid_to": h.memory.valid_to.isoformat(timespec="seconds"), "superseded_by": h.memory.superseded_by}
                if h.memory.valid_to
                else {}
            )
            for h in hits
        ],
        as_json,
        ("id", "score", "created_at", "content") + (("superseded_by",) if history else ()),
    )


@cortex.command("recent")
def recent_cmd(
    limit: int = typer.Option(10, min=1, max=500),
    namespace: str = typer.Option(None, help=NAMESPACE_HELP),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The newest memories."""

    async def work(store):
        return await store.recent(limit, namespace)

    found = _run(work)
    if not found and not as_json:  # as search says it: an unknown namespace is an empty one
        out.print(f"no memories in namespace {namespace} yet" if namespace else "no memories yet", markup=False)
        return
    _print(
        [{"id": m.id, "created_at": m.created_at.isoformat(timespec="seconds"), "content": m.content} for m in found],
        as_json,
        ("id", "created_at", "content"),
    )


@cortex.command("get")
def get_cmd(memory_id: int = MEMORY_ID) -> None:
    """One memory, as JSON, with every version of its fact (`history`, oldest first)."""

    async def work(store):
        from frobozz.memory import ImageStore, MemorySettings

        images = ImageStore(store, MemorySettings())
        image = await images.image(memory_id)
        shown = image and {
            "media_type": image.media_type,
            "width": image.width,
            "height": image.height,
            "description": image.description,
            "file": str(images.path(image.original)),
            "thumbnail": str(images.path(image.thumbnail)),
        }
        return await store.get(memory_id), await store.history(memory_id), shown

    m, history, image = _run(work)
    out.print_json(json.dumps(m.as_json() | {"history": [h.as_json() for h in history], "image": image}))


@cortex.command("supersede")
def supersede_cmd(old_id: int = MEMORY_ID, content: str = typer.Argument(...)) -> None:
    """A fact changed: CONTENT takes the place of memory OLD_ID, which is kept as history."""

    async def work(store):
        return await store.supersede(old_id, content)

    out.print(f"stored {_run(work).id}, superseding {old_id}")


@cortex.command("forget")
def forget_cmd(memory_id: int = MEMORY_ID) -> None:
    """Forget a memory. Forgetting the current version of a changed fact makes the version it superseded current
    again; forgetting an older version links the versions either side of it."""

    async def work(store):
        return await store.forget(memory_id)

    forgotten = _run(work)
    said = f"; {forgotten.said}" if forgotten.said else ""
    out.print(f"forgot {forgotten.memory.id}{said}")


@cortex.command("import")
def import_cmd(
    file: Path = typer.Argument(..., dir_okay=False, help="JSONL: one memory per line; '-' reads stdin."),
    namespace: str = typer.Option(None, help="For lines that do not name one."),
    batch: int = typer.Option(
        64,
        min=1,
        max=1024,
        help="Lines embedded and kept per transaction: an import stopped partway keeps the batches done.",
    ),
) -> None:
    """Import memories from JSONL ({content, metadata?, namespace?, created_at?, image?} per line), from FILE or
    stdin ('-', as `cortex export` writes it). Every line is checked first (an image as store checks one): a bad
    one is named (its number in FILE, and what is wrong) and nothing is imported. Then the lines are kept a batch
    at a time: an import stopped partway (killed, the database gone) keeps the batches it finished, and running
    it again imports the rest, nothing twice, and links the chains of changed facts whatever order the lines are
    in."""
    from frobozz.memory import BulkStore, ImageStore, MemorySettings, MemoryStoreError, check_namespace

    if namespace is not None:
        try:
            check_namespace(namespace)
        except MemoryStoreError as e:
            raise typer.BadParameter(str(e), param_hint="--namespace") from None
    stdin = str(file) == "-"
    if not stdin and not file.exists():  # (a usage error, as typer's own check made it)
        raise typer.BadParameter(f"File '{file}' does not exist.", param_hint="'FILE'")
    try:
        # (utf-8-sig: a byte order mark that an editor put first is no part of the first line)
        text = sys.stdin.buffer.read().decode("utf-8-sig") if stdin else file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        said = "stdin" if stdin else escape(str(file))
        err.print(f"[red]error:[/red] {said} is not UTF-8 text (byte {e.start}); nothing was imported")
        raise typer.Exit(1) from None
    except OSError as e:
        err.print(f"[red]error:[/red] cannot read {escape(str(file))}: {escape(e.strerror or str(e))}")
        raise typer.Exit(1) from None
    numbers, records = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as e:
            err.print(f"[red]error:[/red] line {number} is not JSON ({e}); nothing was imported")
            raise typer.Exit(1) from None
        numbers.append(number)

    async def work(store):
        bulk, stored, duplicates = BulkStore(store, ImageStore(store, MemorySettings(), folders=[])), 0, 0
        for number, record in zip(numbers, records, strict=True):
            try:
                bulk.check(record, namespace)
                await bulk.picture(record)  # an image is checked as store checks one
            except MemoryStoreError as e:
                raise MemoryStoreError(f"line {number}: {e}; nothing was imported") from None
        with _progress() as progress:
            task = progress.add_task("importing", total=len(records))
            for start in range(0, len(records), batch):
                s, d = await bulk.import_batch(records[start : start + batch], namespace)
                stored, duplicates = stored + s, duplicates + d
                progress.advance(task, s + d)
        return stored, duplicates

    stored, duplicates = _run(work)
    out.print(f"imported {stored} memories ({duplicates} already there)")


@cortex.command("export")
def export_cmd(
    output: Path = typer.Option(None, help="Write here instead of stdout (a file: whole, or not at all)."),
    namespace: str = typer.Option(None, help="Only this namespace's memories (default: every namespace's)."),
) -> None:
    """Export memories as JSONL (to back them up or move them); an image goes in its memory's line, in base64."""
    from frobozz.memory import BulkStore, ImageStore, MemorySettings, MemoryStoreError

    if output is not None and output.is_dir():
        err.print(f"[red]error:[/red] {escape(str(output))} is a folder: give the path of a file to write")
        raise typer.Exit(1)
    # a pipe or a device (a FIFO, /dev/stdout) is written as it is, once the store is open; a file (or a link
    # to one) is replaced whole once the export is done (so its folder must be writable; a new one is the
    # owner's only: memories are private), and one that cannot be written is said at once
    special = output is not None and output.exists() and not output.is_file()
    if output is not None and output.exists() and not os.access(output, os.W_OK):  # replaced, it would be written
        err.print(f"[red]error:[/red] cannot write {escape(str(output))}: Permission denied")
        raise typer.Exit(1)
    with contextlib.ExitStack() as files:
        sink: IO[str] = sys.stdout
        if output is not None and not special:
            try:
                sink = files.enter_context(atomic_file(output.resolve(), encoding="utf-8"))
            except OSError as e:
                err.print(f"[red]error:[/red] cannot write {escape(str(output))}: {escape(e.strerror or str(e))}")
                raise typer.Exit(1) from None

        async def work(store):
            bulk = BulkStore(store, ImageStore(store, MemorySettings(), folders=[]))
            total = await bulk.count(namespace)
            try:
                to = files.enter_context(output.open("w", encoding="utf-8")) if special else sink
            except OSError as e:
                raise MemoryStoreError(f"cannot write {output}: {e.strerror or e}") from None
            with _progress() as progress:
                task = progress.add_task("exporting", total=total)
                async for record in bulk.export(namespace):
                    to.write(json.dumps(record, ensure_ascii=False) + "\n")
                    progress.advance(task)
            return total

        total = _run(work)  # a failure leaves a file already at OUTPUT as it was
    if output:
        out.print(f"exported {total} memories to {output}", markup=False)


@cortex.command("reembed")
def reembed_cmd() -> None:
    """Embed every memory again with the configured model (after changing FROBOZZ_EMBEDDING_*)."""
    from frobozz.memory import BulkStore

    async def work(store):
        bulk = BulkStore(store)
        with _progress() as progress:
            task = progress.add_task("re-embedding", total=await bulk.count())
            return await bulk.reembed(lambda n: progress.advance(task, n))

    out.print(f"re-embedded {_run(work, check_model=False)} memories")
