"""Roles come from the prompt files' headers (`<Architect-1 Prompt: ...>` on the first line), never from what
an agent writes: the orchestrator reads them once, checks them, and keeps them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ._inputs import read_input
from ._text import inert
from .exceptions import DialogueInputError

HEADER = re.compile(r"<\s*([A-Za-z][A-Za-z0-9_.-]{0,63})\s+Prompt\s*:[^<>\n]*>")
# a header whose role is not one such word (`<Lead Architect Prompt: ...>`): refused for what it is. The role is one
# ASCII word because it goes into the step keys (`1:agent:ROLE`), the ledger and the terminal, and is compared
# without case (which outside ASCII is not one rule).
_LOOSE = re.compile(r"<\s*(.*?)\s+Prompt\s*:[^<>\n]*>")
_RULE = "one word of ASCII letters, digits, '-', '_' and '.', starting with a letter, at most 64 characters"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
_SETTING = "FROBOZZ_DIALOGUE_MAX_PROMPT_BYTES"


@dataclass(frozen=True)
class Role:
    """One participant: `name` is the header's role, `agent` the short name it was given on the command line."""

    agent: str
    name: str
    prompt: str
    scribe: bool = False


def role_of(text: str, source: str = "the prompt") -> str:
    """The role named by the header on the prompt's first non-empty line (a byte-order mark before it, as some
    editors save one, is not part of the line)."""
    first = next((line.strip() for line in text.removeprefix("\ufeff").splitlines() if line.strip()), "")
    found = HEADER.match(first)
    loose = _LOOSE.match(first) if found is None else None
    if loose is not None and loose.group(1):
        raise DialogueInputError(
            f"{source}'s header names the role {inert(loose.group(1), 64)!r}, which is not allowed: a role is {_RULE} "
            "(like `<Lead-Architect Prompt: what the role does>`)"
        )
    if found is None:
        raise DialogueInputError(
            f"{source} has no role header: its first line must be like `<Architect-1 Prompt: what the role does>`, "
            f"its role {_RULE}" + (f" (it is {first[:60]!r})" if first else " (the file is empty)")
        )
    return found.group(1)


def load_roles(agents: list[tuple[str, Path]], scribe: Path | None, *, limit: int) -> tuple[Role, ...]:
    """The agents (in speaking order) and the scribe, last; each role named once."""
    if len(agents) < 2:
        raise DialogueInputError(f"a dialogue needs at least two agents (--agent NAME=PROMPT_FILE), not {len(agents)}")
    roles = []
    for agent, path in agents:
        if not _NAME.fullmatch(agent):
            raise DialogueInputError(f"the agent name {agent[:40]!r} is not a short name (letters, digits, - and _)")
        text = read_input(path, "the prompt file", limit=limit, setting=_SETTING)
        roles.append(Role(agent=agent, name=role_of(text, str(path)), prompt=text))
    if scribe is not None:
        text = read_input(scribe, "the prompt file", limit=limit, setting=_SETTING)
        roles.append(Role(agent="scribe", name=role_of(text, str(scribe)), prompt=text, scribe=True))
    seen: dict[str, str] = {}
    for role in roles:
        for key, what in ((role.name.lower(), "role"), ("agent:" + role.agent.lower(), "agent name")):
            if key in seen:
                shown = key.removeprefix("agent:")
                raise DialogueInputError(
                    f"two participants have the {what} {shown!r} ({seen[key]} and {role.agent}): each must be different"
                )
            seen[key] = role.agent
    return tuple(roles)
