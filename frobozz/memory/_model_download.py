"""The pre-exported all-MiniLM-L6-v2 ONNX model, fetched once and checked: what a light install (no
PyTorch) embeds with. The archive is the one Chroma's default embedder fetches (the same weights,
exported to ONNX, fp32: its model.onnx takes input_ids, attention_mask, token_type_ids and gives the
last hidden state first, as our own export does); its SHA-256 is checked while it streams, and only
its model and tokenizer are taken out, by name, as regular files. Files land in a folder beside the
target and are renamed into place, so a crash or two processes at once never leave half a model."""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import httpx

log = logging.getLogger("frobozz.memory")
URL = "https://chroma-onnx-models.s3.amazonaws.com/all-MiniLM-L6-v2/onnx.tar.gz"
SHA256 = "913d7300ceae3b2dbc2c50d1de4baacab4be7b9380491c27fab7418616a16ec3"
FILES = ("model.onnx", "tokenizer.json")
MAX_BYTES = 400 * 1024 * 1024  # the archive is about 80 MB


class DownloadError(Exception):
    """The model could not be fetched, or what came is not what was expected (nothing is kept)."""


class Unreachable(DownloadError):
    """No answer from where the model is (a machine offline): the usual reason to export it here."""


def fetch(url: str, sha256: str, target: Path, *, timeout: float = 60.0) -> None:
    """Fetch the archive at `url`, check it against `sha256`, and put its model files in `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as scratch:
        archive = Path(scratch) / "archive.tar.gz"
        try:
            with httpx.stream("GET", url, follow_redirects=True, timeout=httpx.Timeout(timeout, connect=10)) as r:
                r.raise_for_status()
                with archive.open("wb") as out:
                    for chunk in r.iter_bytes(1 << 20):
                        size += len(chunk)
                        if size > MAX_BYTES:
                            raise DownloadError(f"{url} is larger than {MAX_BYTES >> 20} MB: not a model archive")
                        digest.update(chunk)
                        out.write(chunk)
        except httpx.InvalidURL as e:  # (not an HTTPError: a URL no request can be made to)
            raise DownloadError(f"{url[:200]} is not a URL: {e}") from e
        except (httpx.TransportError, httpx.HTTPStatusError) as e:
            kind = Unreachable if isinstance(e, httpx.TransportError) else DownloadError
            raise kind(f"{url} could not be fetched: {e}") from e
        if digest.hexdigest() != sha256.lower():
            raise DownloadError(
                f"{url} does not match its SHA-256 (got {digest.hexdigest()}, expected {sha256}): nothing was kept"
            )
        staged = Path(scratch) / "model"
        staged.mkdir()
        _extract(archive, staged)
        try:
            os.replace(staged, target)
        except OSError:  # another process put it there first: theirs is the same
            if not ready(target):
                raise
    log.info("memory: the embedding model was fetched from %s into %s", url, target)


def _extract(archive: Path, into: Path) -> None:
    """model.onnx and tokenizer.json, wherever the archive keeps them; nothing else, and no links."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            found = {}
            for member in tar.getmembers():
                name = Path(member.name).name
                if name in FILES and member.isfile() and name not in found:
                    found[name] = member
            missing = [name for name in FILES if name not in found]
            if missing:
                raise DownloadError(f"the archive holds no {', '.join(missing)}")
            for name, member in found.items():
                source = tar.extractfile(member)
                assert source is not None
                with source, (into / name).open("wb") as out:
                    shutil.copyfileobj(source, out)
    except (tarfile.TarError, EOFError, OSError, io.UnsupportedOperation) as e:
        raise DownloadError(f"the archive could not be read: {e}") from e


def ready(folder: Path) -> bool:
    return all((folder / name).is_file() for name in FILES)
