"""The local embedding model on ONNX Runtime gives sentence-transformers' vectors for the same weights."""

import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from mcp import Client

from frobozz.memory import MemoryStoreError, _minilm
from frobozz.servers.cortex import create_server
from tests.httpserver import serve
from tests.servers.mcp import call, error

TEXTS = [
    "",
    "a",
    "The doctor recommended the dentist appointment on Monday.",
    "Café 🎉 東京 naïve Zürich " * 200,  # far past 256 tokens: truncated as sentence-transformers does
    "'; DROP TABLE memories; -- \\ % _ \x01",
    "short",
] + [f"note {n} about piano lessons" * (n % 7) for n in range(70)]


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(_minilm.weights_dir()), device="cpu")


def test_the_onnx_model_embeds_like_sentence_transformers_across_batches_and_lengths(cache_dir: Path, reference):
    vectors = _minilm.load(cache_dir).encode(TEXTS)  # 76 texts: two batches, sorted by length, given back in order
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    assert vectors.shape == (len(TEXTS), _minilm.DIM)
    assert np.abs(vectors - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


def test_the_vectors_are_the_very_same_whatever_the_number_of_threads(cache_dir: Path):
    """FROBOZZ_EMBEDDING_THREADS: a memory stored with one count is found alike with another."""
    one = _minilm.load(cache_dir, threads=1).encode(TEXTS)
    assert np.array_equal(one, _minilm.load(cache_dir).encode(TEXTS))
    assert np.array_equal(one, _minilm.load(cache_dir, threads=2).encode(TEXTS))


def test_an_empty_list_embeds_to_nothing(cache_dir: Path):
    assert _minilm.load(cache_dir).encode([]).shape == (0, _minilm.DIM)
    assert _minilm.batches([]) == []


def test_a_text_gets_the_very_same_vector_alone_as_beside_texts_of_any_length(cache_dir: Path):
    """How texts are batched changes what a run costs, never a vector."""
    model = _minilm.load(cache_dir)
    together = model.encode(TEXTS)
    alone = np.stack([model.encode([text])[0] for text in TEXTS])
    assert np.array_equal(together, alone)


def test_a_memory_server_that_has_not_embedded_yet_has_not_imported_numpy():
    """numpy is 0.1 s of a start: cortex and handoff start with every claude session that lists them."""
    check = (
        "import sys; from frobozz.servers import load_server; "
        "[load_server(name) for name in ('cortex', 'handoff')]; "
        "print(sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def _cost(runs: list[list[int]], lengths: list[int]) -> int:
    return sum(_minilm.RUN_TOKENS + len(run) * max(lengths[i] for i in run) for run in runs)


def test_batches_cut_where_padding_costs_more_than_another_run():
    short, long = [8] * 31, [256]
    runs = _minilm.batches(short + long)  # 31 queries and a long memory: padding them to 256 cost 31 x 248 tokens
    assert runs == [list(range(31)), [31]]
    assert _minilm.batches([20, 21, 20, 22]) == [[0, 2, 1, 3]]  # alike: one run, shortest first
    many = _minilm.batches([10] * 200)
    assert sorted(len(run) for run in many) == [8, 64, 64, 64]
    assert sorted(i for run in many for i in run) == list(range(200))


def test_batches_are_the_cheapest_partition_of_the_sorted_texts():
    """Against every way of cutting the sorted lengths into runs (brute force, small inputs)."""
    import itertools
    import random

    rng = random.Random(7)
    for _ in range(300):
        lengths = [rng.choice([2, 5, 9, 14, 30, 70, 256]) for _ in range(rng.randint(1, 9))]
        size = rng.choice([1, 2, 3, 4, _minilm.BATCH])  # the cap on a run's texts, small enough to bind here
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        partitions = (
            [order[a:b] for a, b in itertools.pairwise((0, *cuts, len(order)))]
            for k in range(len(order))
            for cuts in itertools.combinations(range(1, len(order)), k)
        )
        cheapest = min(_cost(runs, lengths) for runs in partitions if all(len(run) <= size for run in runs))
        runs = _minilm.batches(lengths, size=size)
        assert sorted(i for run in runs for i in run) == list(range(len(lengths)))
        assert all(len(run) <= size for run in runs) and _cost(runs, lengths) == cheapest


def test_a_damaged_cached_export_is_made_again(tmp_path: Path, cache_dir: Path):
    damaged = _minilm.onnx_path(tmp_path)
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"not an onnx file")
    model = _minilm.load(tmp_path)
    assert damaged.stat().st_size > 10_000_000 and not list(damaged.parent.glob("*.part"))
    good = _minilm.load(cache_dir)
    assert np.allclose(model.encode(["the same weights"]), good.encode(["the same weights"]), atol=1e-6)


@pytest.mark.anyio
async def test_a_cache_directory_that_cannot_be_written_is_a_clear_error_and_stores_nothing(cortex_settings, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    async with Client(create_server(cortex_settings.model_copy(update={"cache_dir": blocked}))) as client:
        message = await error(client, "store", content="Remember the brass lantern.")
        assert "FROBOZZ_CACHE_DIR" in message and "a-file" in message
    async with Client(create_server(cortex_settings)) as client:
        assert (await call(client, "recent"))["memories"] == []


@pytest.fixture(scope="module")
def archive(cache_dir: Path) -> Callable[..., bytes]:
    """The archive of each layout, made once for the module: at gzip's default level each took 5 s of CPU."""
    made: dict[bool, bytes] = {}

    def of(*, tokenizer_as_link: bool = False) -> bytes:
        if tokenizer_as_link not in made:
            made[tokenizer_as_link] = _archive(cache_dir, tokenizer_as_link=tokenizer_as_link)
        return made[tokenizer_as_link]

    return of


def _archive(cache_dir: Path, *, tokenizer_as_link: bool = False) -> bytes:
    """An archive laid out as Chroma's (onnx/model.onnx, onnx/tokenizer.json, more), from this machine's export
    (gzip's fastest level: its size is not what is tested)."""
    _minilm.load(cache_dir)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(_minilm.onnx_path(cache_dir), "onnx/model.onnx")
        if tokenizer_as_link:
            link = tarfile.TarInfo("onnx/tokenizer.json")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(link)
        else:
            tar.add(_minilm.weights_dir() / "tokenizer.json", "onnx/tokenizer.json")
        readme = tarfile.TarInfo("../../outside.txt")
        readme.size = 2
        tar.addfile(readme, io.BytesIO(b"no"))
    return buffer.getvalue()


@pytest.fixture
def light_install(cache_dir, monkeypatch):
    """No exporter, as on a user's machine without PyTorch (the reference export is made first)."""
    _minilm.load(cache_dir)

    def no_torch(target):
        raise AssertionError("a light install has no PyTorch to export with")

    monkeypatch.setattr(_minilm, "export", no_torch)
    monkeypatch.setattr(_minilm, "onnx_path_if_exportable", lambda cache_dir: None)


def test_a_light_install_fetches_the_pre_exported_model_once_checks_it_and_embeds_the_same(
    cache_dir: Path, tmp_path: Path, light_install, archive
):
    body = archive()
    digest = hashlib.sha256(body).hexdigest()
    with serve({"/onnx.tar.gz": (200, body)}) as base:
        model = _minilm.load(tmp_path / "c", f"{base}/onnx.tar.gz", digest)
    folder = tmp_path / "c" / "models" / f"all-MiniLM-L6-v2-{digest[:16]}"
    assert sorted(p.name for p in folder.iterdir()) == ["model.onnx", "tokenizer.json"]
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # nothing half-made, nothing outside
    assert not (tmp_path / "outside.txt").exists()
    again = _minilm.load(tmp_path / "c", "http://127.0.0.1:9/gone.tar.gz", digest)  # from disk: no network
    reference = _minilm.load(cache_dir)
    for loaded in (model, again):
        assert np.abs(loaded.encode(TEXTS[:8]) - reference.encode(TEXTS[:8])).max() < 1e-6


@pytest.mark.parametrize("case", ["checksum", "not found", "not an archive", "a link", "no network", "no url"])
def test_a_fetch_that_fails_or_does_not_check_out_keeps_nothing_and_says_how_to_go_on(
    tmp_path: Path, light_install, archive, case
):
    body = archive(tokenizer_as_link=case == "a link") if case in ("checksum", "a link") else b"unread"
    routes = {"/good": (200, body), "/junk": (200, b"\x1f\x8b not gzip at all"), "/missing": (404, b"no")}
    path, digest = {
        "checksum": ("/good", "0" * 64),
        "not found": ("/missing", None),
        "not an archive": ("/junk", None),
        "a link": ("/good", None),
    }.get(case, ("/good", None))
    with serve(routes) as base:
        url = {"no network": "http://127.0.0.1:9/onnx.tar.gz", "no url": None}.get(case, f"{base}{path}")
        served = routes.get(path, (0, b""))[1]
        with pytest.raises(MemoryStoreError, match=r"pip install 'frobozz\[export\]'") as raised:
            _minilm.load(tmp_path / case, url, digest or hashlib.sha256(served).hexdigest())
    assert {
        "checksum": "SHA-256",
        "not found": "404",
        "not an archive": "could not be read",
        "a link": "no tokenizer.json",
        "no network": "could not be fetched",
        "no url": "FROBOZZ_EMBEDDING_ONNX_URL",
    }[case] in str(raised.value)
    models = tmp_path / case / "models"
    assert not models.exists() or not any(models.iterdir())  # nothing kept, not even half


def test_with_no_network_the_model_is_exported_here_when_the_exporter_is_installed(
    cache_dir: Path, tmp_path: Path, monkeypatch
):
    exported = []

    def export(target):  # the real export takes seconds; the file it makes is the cached one's
        exported.append(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_minilm.onnx_path(cache_dir), target)

    _minilm.load(cache_dir)
    monkeypatch.setattr(_minilm, "export", export)
    model = _minilm.load(tmp_path, "http://127.0.0.1:9/onnx.tar.gz", "1" * 64)
    assert exported == [_minilm.onnx_path(tmp_path)] and model.encode(["lamp"]).shape == (1, _minilm.DIM)


def _waiting_on(lock: Path) -> bool:
    """Whether a process or thread is blocked on `lock` (the kernel lists a blocked request as `->`)."""
    inode = f":{lock.stat().st_ino} "
    return any("->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines())


def test_two_loads_at_once_on_an_empty_cache_export_once_and_the_second_waits_for_that_file(
    cache_dir: Path, tmp_path: Path, monkeypatch
):
    """Two servers (or two test workers) starting together: one exports, the other waits and loads its file."""
    import threading
    import time

    exported = []
    target = _minilm.onnx_path(tmp_path)
    lock = target.parent / f".{target.name}.lock"

    def export(target):  # holds the lock until the other load is seen waiting on it, then makes the file
        exported.append(target)
        deadline = time.monotonic() + 120
        while not _waiting_on(lock):
            assert time.monotonic() < deadline, "the second load never waited for the first's export"
            time.sleep(0.01)
        shutil.copyfile(_minilm.onnx_path(cache_dir), target)

    _minilm.load(cache_dir)
    monkeypatch.setattr(_minilm, "export", export)
    models: list = []
    threads = [
        threading.Thread(target=lambda: models.append(_minilm.load.__wrapped__(tmp_path, None))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert exported == [target] and len(models) == 2
    assert np.allclose(models[0].encode(["lamp"]), models[1].encode(["lamp"]), atol=1e-6)
