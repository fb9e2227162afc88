"""Text from elsewhere (a model, a memory, mail) made safe to show on a terminal or in a log line."""

from __future__ import annotations


def printable(text: str, *, keep: str = "") -> str:
    """`text` with control characters (but those in `keep`) shown escaped: what came from elsewhere must not
    drive the terminal (an ESC sequence) or forge log lines when it is shown."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii") for c in text)


def printable_lines(text: str) -> str:
    """`text` as `printable` makes each of its lines: many lines (a game's answer) stay many."""
    return "\n".join(printable(line) for line in text.splitlines())


def printable_stream(text: str) -> str:
    """`text` as `printable` makes it but for line breaks and tabs: a reply streamed in pieces (which may end
    mid-line) keeps its layout, and an ESC or OSC sequence in it (a page the model read, echoed) is shown, not
    obeyed by the terminal (a title set, the clipboard written)."""
    return printable(text, keep="\n\t")
