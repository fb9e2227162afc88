"""A routine's settings, validated at the door (pydantic), and the engine producer that reads its source.

IMAP credentials are never part of a routine: it names where they are (an environment variable or a
file), and each worker reads them there when it looks at the mailbox."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit
from zoneinfo import available_timezones

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator

from frobozz.engine import model_name_problem
from frobozz.engine.producers import (
    Deliveries,
    Feed,
    Inbox,
    Polling,
    ProducerError,
    Schedule,
    check_cron,
    check_mailbox,
    parse_url,
    zone,
)
from frobozz.memory import MemoryStoreError, check_namespace, unstorable

from .exceptions import RoutineInputError

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
PASSWORD_ENV = "FROBOZZ_IMAP_PASSWORD"
MAX_CRON = 200
_NOT_ZONES = ("localtime", "posixrules")  # files beside the zones: each machine's own zone, a default for rules
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_RANDOM = re.compile(r"(?<![A-Za-z])R(?![A-Za-z])", re.IGNORECASE)  # croniter's R: a random time, each worker its own


class Routine(BaseModel):
    name: str
    kind: Literal["cron", "every", "inbox", "feed"]
    cron: str | None = None
    tz: str = "UTC"
    every: float | None = Field(default=None, ge=1, le=366 * 86400, allow_inf_nan=False)
    url: str | None = Field(default=None, max_length=2000)
    poll: float = Field(default=60.0, ge=1, le=86400, allow_inf_nan=False)
    prompt: str = Field(min_length=1, max_length=100_000)
    namespace: str = ""  # memory's; "" is routine-NAME (`namespace_or_default`)
    workspace: str | None = Field(default=None, max_length=4096)
    model: str | None = Field(default=None, max_length=200)
    max_turns: int | None = Field(default=None, ge=1, le=1000)
    max_cost: float | None = Field(default=None, gt=0, le=1000, allow_inf_nan=False)
    max_seconds: float | None = Field(default=None, gt=0, le=86400, allow_inf_nan=False)
    game: str | None = Field(default=None, max_length=4096)
    password_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    password_file: str | None = Field(default=None, max_length=4096)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        """The rule said in words (pydantic's own error showed the pattern), the name as text, not as codes."""
        if not re.fullmatch(NAME, name):
            raise ValueError(
                f"{name[:80]!r} is not a routine's name: letters, digits, '_', '.' and '-', starting with a letter "
                "or a digit, at most 64 characters"
            )
        return name

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, namespace: str) -> str:
        """memory's rule, said in words as memory says it (the pattern showed pydantic's regex)."""
        try:
            return namespace and check_namespace(namespace)
        except MemoryStoreError as e:
            raise ValueError(str(e)) from None

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Routine:
        if not self.prompt.strip():
            raise ValueError("the prompt is empty")
        for field, value in self:
            if isinstance(value, str) and unstorable(value):
                raise ValueError(f"the {field} holds a NUL byte or bytes that are not UTF-8, which cannot be stored")
        stored = bool((info.context or {}).get("stored"))  # one stored before a check was added is read as it is
        if self.model == "scripted" and not stored:  # chat's and the agent's offline model: a worker has none to run
            raise ValueError("--model scripted is for chat and serve agent; a routine runs claude's model")
        try:
            if not stored:
                self._fresh()
            if self.kind == "cron":
                self.cron = check_cron(self.cron or "", comes=not stored)
                zone(self.tz)
            elif self.kind == "every" and self.every is None:
                raise ValueError("--every needs a number of seconds")
            elif self.kind == "inbox":
                parse_url(self.url or "")
                if not self.password_file and not self.password_env:
                    self.password_env = PASSWORD_ENV
            elif self.kind == "feed":
                Feed(self.url or "", self.prompt)
        except ProducerError as e:
            raise ValueError(str(e)) from e
        return self

    def _fresh(self) -> None:
        """The checks a routine being added passes (added after some were stored, which are read as they are)."""
        if self.model is not None and (problem := model_name_problem(self.model)):
            raise ValueError(f"--model {problem}")
        if self.workspace is not None:
            _check_workspace(self.workspace)
        for option, value in (("--game", self.game), ("--password-file", self.password_file)):
            if value is not None and (not value.strip() or _CONTROL.search(value)):
                raise ValueError(f"{option} {value[:80]!r} is not a name or a path")
        for option, field, kinds in (
            ("--tz", "tz", ("cron",)),
            ("--poll", "poll", ("inbox", "feed")),
            ("--password-env", "password_env", ("inbox",)),
            ("--password-file", "password_file", ("inbox",)),
        ):
            if field in self.model_fields_set and getattr(self, field) is not None and self.kind not in kinds:
                only = " and ".join(f"--{kind}" for kind in kinds)
                raise ValueError(f"{option} is for {only} routines, not --{self.kind} ones")
        if self.password_env is not None and self.password_file is not None:  # (which one a worker read was not said)
            raise ValueError(
                "give the mailbox's password with --password-env NAME or --password-file FILE (one of them)"
            )
        if self.kind == "cron":
            cron = self.cron or ""
            if len(cron) > MAX_CRON:
                raise ValueError(f"the cron expression is {len(cron)} characters long; the limit is {MAX_CRON}")
            if _RANDOM.search(cron):
                raise ValueError(f"the cron expression {cron[:80]!r} has R (a random time): give the time itself")
            if self.tz != "UTC" and (self.tz in _NOT_ZONES or self.tz not in available_timezones()):
                raise ValueError(f"unknown time zone {self.tz[:60]!r} (use an IANA name such as Europe/Lisbon)")
        elif self.kind == "feed":
            self.url = _feed_url(self.url or "")
        elif self.kind == "inbox":
            _check_inbox(self.url or "")

    @property
    def namespace_or_default(self) -> str:
        return self.namespace or f"routine-{self.name}"[:100]

    @property
    def source(self) -> str:
        return f"{self.kind}:{self.url}" if self.url else self.kind

    def describe(self) -> str:
        if self.kind == "cron":
            return f"cron {self.cron} ({self.tz})"
        if self.kind == "every":
            every = self.every or 0.0
            return f"every {seconds(every)}" + (f" ({readable(every)})" if readable(every) else "")
        return f"{self.kind} {self.url} (poll {seconds(self.poll)}" + (
            f", {readable(self.poll)})" if readable(self.poll) else ")"
        )


def seconds(value: float) -> str:
    """A number of seconds as typed: '31622400 s', '1.5 s' (`:g` said 3.16224e+07)."""
    return f"{value:.3f}".rstrip("0").rstrip(".") + " s"


def readable(value: float) -> str:
    """An interval of an hour or more in days, hours, minutes: '366 d', '1 d 2 h 30 min'; '' for less."""
    if value < 3600:
        return ""
    parts, left = [], int(value)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {unit}")
    return " ".join(parts)


def _check_workspace(workspace: str) -> None:
    """A folder claude works in (made at the first firing if missing), or ValueError: empty, or a file there."""
    if not workspace.strip() or _CONTROL.search(workspace):
        raise ValueError(f"--workspace {workspace[:80]!r} is not a folder's path")
    path = Path(workspace).expanduser()
    try:
        found = next((p for p in (path, *path.parents) if p.exists()), None)
    except OSError as e:  # (a folder on the way this account may not look into)
        raise ValueError(f"--workspace {workspace[:80]!r} cannot be looked at: {e.strerror}") from None
    if found is not None and not found.is_dir():
        raise ValueError(f"--workspace {workspace[:80]!r}: {str(found)[:80]!r} is a file, not a folder")


def _feed_url(url: str) -> str:
    """The feed's URL with its scheme in lower case, or ValueError when no fetch could work or it holds secrets."""
    if _CONTROL.search(url) or any(c.isspace() for c in url):
        raise ValueError(f"the feed URL {url[:80]!r} has spaces or control characters (percent-encode them)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"the feed URL {url[:80]!r} cannot be read: {e}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"a feed is an http:// or https:// URL, not {url[:80]!r}")
    if not parts.hostname:
        raise ValueError(f"the feed URL {url[:80]!r} names no host")
    if port == 0:
        raise ValueError(f"the feed URL {url[:80]!r} has port 0")
    if parts.username or parts.password:
        raise ValueError("put no user or password in the feed's URL: it is stored and shown as it is")
    return parts.scheme.lower() + url[len(parts.scheme) :]


def _check_inbox(url: str) -> None:
    """ValueError for an inbox URL the engine takes but no worker could log in with, or one that would put
    more than a user name and a folder into the IMAP commands."""
    if _CONTROL.search(url):
        raise ValueError(f"the inbox URL {url[:80]!r} has control characters")
    _, _, _, folder, user = parse_url(url)
    if urlsplit(url).port == 0:
        raise ValueError(f"the inbox URL {url[:80]!r} has port 0")
    if not user:
        raise ValueError("the inbox URL names no user: imaps://USER@host[:port][/folder] (the worker logs in as USER)")
    check_mailbox(user, folder)  # (a ProducerError, said as the spec's)


def routine(**values: object) -> Routine:
    """A routine from settings a person gave, or a RoutineInputError saying what is wrong."""
    try:
        return Routine(**values)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'routine'}: {err['msg'].removeprefix('Value error, ')}"
            for err in e.errors()
        )
        raise RoutineInputError(problems[:1000]) from None


def password(spec: Routine) -> str:
    """The mailbox's password, from the file or the environment variable the routine names."""
    if spec.password_file:
        try:
            text = Path(spec.password_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise RoutineInputError(f"the password file {spec.password_file} cannot be read: {e.strerror}") from None
        if not text:
            raise RoutineInputError(f"the password file {spec.password_file} is empty")
        return text
    value = os.environ.get(spec.password_env or PASSWORD_ENV, "")
    if not value:
        raise RoutineInputError(
            f"set {spec.password_env or PASSWORD_ENV} to the mailbox's password (or give --password-file)"
        )
    return value


def producer(
    spec: Routine,
    deliveries: Deliveries,
    *,
    created: datetime,
    files: Path | None = None,
    idle: bool = True,
    timeout: float = 30.0,
) -> Polling:
    """The engine producer that reads this routine's source, remembering through `deliveries`."""
    try:
        if spec.kind in ("cron", "every"):
            return Schedule(
                spec.prompt,
                cron=spec.cron,
                tz=spec.tz,
                every=spec.every,
                source=spec.name,
                deliveries=deliveries,
                start=created,
                files=files,
            )
        if spec.kind == "feed":
            return Feed(
                spec.url or "",
                spec.prompt,
                source=spec.name,
                since=created,
                deliveries=deliveries,
                interval=spec.poll,
                files=files,
                timeout=timeout,
            )
        return Inbox(
            spec.url or "",
            spec.prompt,
            password=password(spec),
            source=spec.name,
            deliveries=deliveries,
            interval=spec.poll,
            files=files,
            idle=idle,
            timeout=timeout,
        )
    except ProducerError as e:
        raise RoutineInputError(str(e)) from e
