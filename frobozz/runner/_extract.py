"""Take the game command out of a reply, however the model phrased it.

In order of trust: <command>…</command> tags; lines starting with `>` or `COMMAND:`; else the
last short imperative line. Thinking is not in the reply text; <thinking> tags written into the
text are dropped too. Pure functions: the observer that uses them lives in `_observers`.
"""

from __future__ import annotations

import re

from frobozz.games import CommandError, check_command

_THINKING = re.compile(r"<(thinking|reasoning|scratchpad)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<command>(.*?)</command>", re.IGNORECASE | re.DOTALL)
_PROMPT_LINE = re.compile(r"^[ \t]*>[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)
_COMMAND_LINE = re.compile(r"^[ \t*_]*command[ \t*_]*:[ \t*_]*(\S.*?)[ \t*_]*$", re.IGNORECASE | re.MULTILINE)
_MAX_WORDS = 8
_PROSE_START = re.compile(
    r"^(i|i'm|i'll|let's|let me|the|this|that|it|we|you|my|there|here|so|now|ok|okay)\b", re.IGNORECASE
)


def _clean(raw: str) -> str | None:
    text = raw.strip().strip("`*_\"'“”").strip()
    text = re.sub(r"^(>|command:)\s*", "", text, flags=re.IGNORECASE).rstrip(".!").strip()
    try:
        return check_command(text)
    except CommandError:
        return None


def _last_imperative_line(text: str) -> str | None:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    line = re.sub(r"^([-*•]|\d+[.)])\s+", "", lines[-1])  # a list bullet
    words = line.rstrip(".!").split()
    if not words or len(words) > _MAX_WORDS or line.endswith(("?", ":")) or _PROSE_START.match(line):
        return None
    return _clean(line)


def extract_commands(reply: str, *, multi: bool = False) -> list[str]:
    """The command(s) in `reply`: at most one unless `multi`; [] when there is no usable command."""
    text = _THINKING.sub("", reply)
    for pattern in (_TAG, _COMMAND_LINE, _PROMPT_LINE):
        matches = pattern.findall(text)
        found = [c for c in (_clean(m) for m in matches) if c]
        if found or (matches and pattern is _TAG):  # a reply that uses tags is judged by its tags alone
            return found if multi else found[:1]
    last = _last_imperative_line(text)
    return [last] if last else []
