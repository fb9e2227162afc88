"""Secrets taken out of what the plugin archives (claude's transcript: prompts, tool calls, tool results),
before it reaches the database: API keys and tokens of the well-known forms, private key blocks,
credentials in URLs and Authorization headers, and values given to names like password/secret/token.

By hand, on purpose: detect-secrets (the well-kept scanner) says which line holds a secret but not always
where it is (for a GitHub token its value is "ghp", for a private key the header line), which is what a
redactor needs, and it costs a millisecond a line. What it cannot know (a password in prose) stays."""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"
_PATTERNS = [
    re.compile(p)
    for p in (
        # whole private key blocks (and a block cut off by a transcript's limit)
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
        # prefixed keys and tokens: Anthropic, OpenAI, GitHub, GitLab, Slack, Stripe, AWS, Google, npm, PyPI,
        # Hugging Face, SendGrid, Twilio, JSON web tokens
        r"\bsk-(ant-)?[A-Za-z0-9_-]{16,}",
        r"\b(ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}",
        r"\bglpat-[A-Za-z0-9_-]{20,}",
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
        r"\b[rs]k_(live|test)_[A-Za-z0-9]{16,}",
        r"\b(AKIA|ASIA)[A-Z0-9]{16}\b",
        r"\bAIza[A-Za-z0-9_-]{35}",
        r"\bnpm_[A-Za-z0-9]{36}",
        r"\bpypi-[A-Za-z0-9_-]{50,}",
        r"\bhf_[A-Za-z0-9]{30,}",
        r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
        r"\bSK[0-9a-fA-F]{32}\b",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    )
]
# the value only: what names it stays, so the archive still says a password was there
_KEEP_NAME = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"(\b(?:authorization|proxy-authorization)\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]{8,}",
        r"(\b(?:bearer)\s+)[A-Za-z0-9._~+/=-]{20,}",
        r"(\b[a-z][a-z0-9+.-]*://[^\s:/@\"']+:)[^\s@/\"']+(?=@)",  # user:password@ in a URL
        r"(\b[A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|"
        r"client[_-]?secret)[A-Za-z0-9_.-]*[\"']?\s*[:=]\s*[\"']?)(?![\"'\s,;}]|\[REDACTED\]|\d+\b)"
        r"[^\s\"',;}]{6,}",
    )
]


def redact(text: str) -> str:
    """`text` with the secrets it holds replaced by [REDACTED]."""
    if len(text) < 8:
        return text
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    for pattern in _KEEP_NAME:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


_SECRET_KEY = re.compile(
    r"(password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|authorization)$", re.IGNORECASE
)


def redact_value(value: Any) -> Any:
    """A JSON value with every string in it redacted (keys are kept: claude's own field names), and the whole
    value of a key named like a secret ("api_key", "password")."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, dict):
        return {
            k: MASK if isinstance(v, str) and v and _SECRET_KEY.search(str(k)) else redact_value(v)
            for k, v in value.items()
        }
    return value
