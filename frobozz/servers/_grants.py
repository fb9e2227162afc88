"""Scoped tokens for a hub shared by several people or agents (`FROBOZZ_HUB_TOKENS`): each token has a
name, the servers it may use, and the cortex / handoff namespaces it may read and write.

The file (TOML) holds tokens hashed, never in clear:

    [[token]]
    name = "alice"
    sha256 = "…64 hex digits: sha256 of the token…"
    servers = ["cortex", "handoff"]     # "*": every server
    read = ["alice", "team"]            # namespaces it may read ("*": any)
    write = ["alice"]                   # namespaces it may write (and so read)
    users = ["alice"]                   # the agent service: whose workspaces it may use ("*": any)

The HTTP layer finds the caller's grant (comparing hashes in constant time) and refuses a server it
may not use; the tools ask `check()` before they touch a namespace. Outside the hub (stdio, one token)
there is no grant, and every namespace is open, as before. Over HTTP a request may name its default namespace
(X-Frobozz-Namespace, `asked()`): a tool given none works in that one, checked as any other."""

from __future__ import annotations

import hashlib
import hmac
import tomllib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._configs import NAMESPACE_HEADER

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

Name = Annotated[str, Field(pattern=r"^(\*|[A-Za-z0-9][A-Za-z0-9_.:-]{0,99})$")]  # a server, a namespace, or *
Names = Annotated[list[Name], Field(max_length=1000)]


class Grant(BaseModel):
    """One token's access to the hub: its name, its SHA-256 (never the token), the servers it may call and the
    namespaces it may read and write."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", repr=False)
    servers: Names
    read: Names = []
    write: Names = []
    users: Names = []  # the agent service: whose workspaces (ROOT/<user>/…) it may use ("*": anyone's)

    def may_use(self, server: str) -> bool:
        return "*" in self.servers or server in self.servers

    def may(self, namespace: str, *, write: bool) -> bool:
        allowed = self.write if write else [*self.read, *self.write]
        return "*" in allowed or namespace in allowed


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: list[Grant] = Field(min_length=1)


GRANT: ContextVar[Grant | None] = ContextVar("frobozz_grant", default=None)  # None: not scoped


def hashed(token: str) -> str:
    """A token as it is kept: its SHA-256, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


def load_grants(path: Path) -> list[Grant]:
    """The grants in `path`; a file that is missing, not TOML or not as documented is a ValueError saying so."""
    try:
        grants = _File.model_validate(tomllib.loads(path.read_text(encoding="utf-8"))).token
    except OSError as e:
        raise ValueError(f"FROBOZZ_HUB_TOKENS: cannot read {path}: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"FROBOZZ_HUB_TOKENS: {path} is not TOML: {e}") from e
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5])
        raise ValueError(f"FROBOZZ_HUB_TOKENS: {path}: {problems}") from e
    for field in ("name", "sha256"):
        values = [getattr(g, field) for g in grants]
        if len(set(values)) != len(values):
            raise ValueError(f"FROBOZZ_HUB_TOKENS: {path}: two tokens have the same {field}")
    return grants


def find_grant(grants: list[Grant], token: str) -> Grant | None:
    """The grant of `token`, every entry compared in constant time (no early exit)."""
    digest, found = hashed(token).encode(), None
    for grant in grants:
        if hmac.compare_digest(digest, grant.sha256.encode()):
            found = grant
    return found


@contextmanager
def granted(grant: Grant | None) -> Iterator[None]:
    """The tools called within see `grant` (the HTTP layer sets it for each request)."""
    reset = GRANT.set(grant)
    try:
        yield
    finally:
        GRANT.reset(reset)


def scoped() -> bool:
    """Whether the caller came with a scoped token (else every namespace is open)."""
    return GRANT.get() is not None


def readable(namespaces: Iterable[str]) -> list[str]:
    """Those of `namespaces` the caller's token may read (all of them without a scoped token)."""
    grant = GRANT.get()
    return [n for n in namespaces if grant is None or grant.may(n, write=False)]


def check(namespace: str, *, write: bool, what: str | None = None) -> None:
    """Refuse (ToolError, before anything changes) a namespace the caller's token may not read or write.
    `what` (a memory or letter asked for by id) is refused without naming its namespace."""
    grant = GRANT.get()
    if grant is None or grant.may(namespace, write=write):
        return
    verb = "write" if write else "read"
    if what:
        raise ToolError(f"token {grant.name!r} may not {verb} {what}: it is not in a namespace the token may {verb}")
    can = ", ".join(grant.write if write else sorted({*grant.read, *grant.write})) or "none"
    raise ToolError(f"token {grant.name!r} may not {verb} namespace {namespace!r} (it may {verb}: {can})")


def asked(namespace: str | None, ctx: Context) -> str | None:
    """The namespace a memory tool works in: the one it was given; else, over HTTP, the one the request names in
    X-Frobozz-Namespace (the client's default, as the plugin installed with `--hub --namespace` sends it); else
    None, the server's default (FROBOZZ_CORTEX_DEFAULT_NAMESPACE, stdio's only one). An empty header names none;
    one that cannot name a namespace is refused (ToolError, nothing done), never put in the server's default's
    place. The caller checks the grant for what this returns, as for a namespace given."""
    if namespace is not None:
        return namespace
    try:
        headers = getattr(ctx.request_context.request, "headers", None)
    except ValueError:  # called outside a request (in-process): no header
        headers = None
    named = headers.get(NAMESPACE_HEADER, "").strip() if headers is not None else ""
    if not named:
        return None
    from ..memory import MemoryStoreError, check_namespace  # (the memory servers import it already)

    try:
        return check_namespace(named)
    except MemoryStoreError as e:
        raise ToolError(f"the {NAMESPACE_HEADER} header: {e}: nothing done") from None
