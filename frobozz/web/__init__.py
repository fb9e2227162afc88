"""The web view: runs (live and past, with their transcripts, score charts and maps) and memory, in the
browser. A part of its own, reading runs and memory through their public APIs; `frobozz web` serves it,
and `serve all --http` mounts it at `/` behind the hub's token. Nothing else imports it."""

from ._app import create_app
from .settings import WebSettings

__all__ = ["WebSettings", "create_app"]
