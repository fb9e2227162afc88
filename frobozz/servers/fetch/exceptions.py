"""The fetch server's errors: one root; each message says what happened and what to try."""


class FetchError(Exception):
    """Root of every error the fetch server raises on purpose."""


class BlockedError(FetchError):
    """Refused on purpose: a private address, robots.txt, a scheme that is not http(s)."""


class UnsupportedError(FetchError):
    """The content is of a kind the fetch server cannot turn into text or an image."""
