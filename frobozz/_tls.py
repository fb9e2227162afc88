"""One TLS context for the process's HTTPS clients. httpx builds a context for every client it makes (the CA
bundle read and parsed: 24 ms of CPU a client), and Frobozz makes clients often: the engine's proxy one for
every claude it starts, the feed producer one a poll. A context is safe to share between clients and threads;
it is made on first use, so the certificate settings (`SSL_CERT_FILE`, `SSL_CERT_DIR`) are read then."""

from __future__ import annotations

import functools
import ssl


@functools.cache
def tls_context(*, trust_env: bool = True) -> ssl.SSLContext:
    """The context httpx would make for `verify=True` (`trust_env=False`: without the certificate variables)."""
    import httpx  # here: every CLI command imports this module (games' install), few make a client

    return httpx.create_ssl_context(trust_env=trust_env)


@functools.cache
def system_tls_context() -> ssl.SSLContext:
    """Python's default context, on the system's trust store: the IMAP producer's, once a process rather than
    once a connection (a poll)."""
    return ssl.create_default_context()
