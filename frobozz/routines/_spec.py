"""A routine's settings, validated at the door (pydantic), and the engine producer that reads its source.

IMAP credentials are never part of a routine: it names where they are (an environment variable or a
file), and each worker reads them there when it looks at the mailbox."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, model_validator

from frobozz.engine.producers import (
    Deliveries,
    Feed,
    Inbox,
    Polling,
    ProducerError,
    Schedule,
    check_cron,
    parse_url,
    zone,
)

from .exceptions import RoutineInputError

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
PASSWORD_ENV = "FROBOZZ_IMAP_PASSWORD"


class Routine(BaseModel):
    name: str = Field(pattern=NAME)
    kind: Literal["cron", "every", "inbox", "feed"]
    cron: str | None = None
    tz: str = "UTC"
    every: float | None = Field(default=None, ge=1, le=366 * 86400, allow_inf_nan=False)
    url: str | None = Field(default=None, max_length=2000)
    poll: float = Field(default=60.0, ge=1, le=86400)
    prompt: str = Field(min_length=1, max_length=100_000)
    namespace: str = Field(default="", pattern=r"^([A-Za-z0-9][A-Za-z0-9_.:-]{0,99})?$")
    workspace: str | None = Field(default=None, max_length=4096)
    model: str | None = Field(default=None, max_length=200)
    max_turns: int | None = Field(default=None, ge=1, le=1000)
    max_cost: float | None = Field(default=None, gt=0, le=1000)
    max_seconds: float | None = Field(default=None, gt=0, le=86400)
    game: str | None = Field(default=None, max_length=4096)
    password_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    password_file: str | None = Field(default=None, max_length=4096)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Routine:
        if not self.prompt.strip():
            raise ValueError("the prompt is empty")
        stored = bool((info.context or {}).get("stored"))  # one stored before a check was added is read as it is
        if self.model == "scripted" and not stored:  # chat's and the agent's offline model: a worker has none to run
            raise ValueError("--model scripted is for chat and serve agent; a routine runs claude's model")
        try:
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
            return f"every {self.every:g} s"
        return f"{self.kind} {self.url} (poll {self.poll:g} s)"


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
    spec: Routine, deliveries: Deliveries, *, created: datetime, files: Path | None = None, idle: bool = True
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
        )
    except ProducerError as e:
        raise RoutineInputError(str(e)) from e
