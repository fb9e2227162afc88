"""The answers to a session's questions, among instances: a client gives one on whichever instance it uses (kept
in `agent_answers`, `_leases`: the first one counts), and the instance whose claude asked waits for it, woken by
the database's notification (a missed one costs at most two seconds), until the question times out."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import anyio

from frobozz.memory import unstorable

from ._leases import Leases
from ._session import AgentSession
from .exceptions import InputError, QuestionError

QUESTION_ID = re.compile(r"[0-9A-Za-z]{1,64}")  # made as 16 hex digits: an id unlike one was never asked


def checked(asked: list[Any], answers: Mapping[str, Any]) -> dict[str, Any]:
    """`answers` as claude's AskUserQuestion takes them: each asked question's text to the label chosen (or the
    user's own words), a string; for a multi-select question, a list of strings too (claude joins them with
    ", "). Anything else was a schema error to claude, or an unknown question no answer at all: InputError."""
    multi = {q.get("question"): bool(q.get("multiSelect")) for q in asked if isinstance(q, dict)}
    for question, answer in answers.items():
        if question not in multi:
            said = "; ".join(repr(str(q)[:200]) for q in multi) or "none"
            raise InputError(f"{str(question)[:200]!r} was not asked; the questions asked: {said}")
        listed = multi[question] and isinstance(answer, list)
        if not (isinstance(answer, str) or (listed and all(isinstance(a, str) for a in answer))):
            kind = "a string, or a list of strings" if multi[question] else "a string (it is not a multi-select)"
            raise InputError(
                f"the answer to {question[:200]!r} is {json.dumps(answer)[:100]}: an answer is the label chosen "
                f"(or the user's own words), {kind}"
            )
        if any(unstorable(a) for a in ([answer] if isinstance(answer, str) else answer)):
            raise InputError(
                f"the answer to {question[:200]!r} holds a NUL character or an unpaired \\ud800-\\udfff escape"
            )
    return dict(answers)


class Answers:
    """A session's questions answered on any instance and awaited on the one whose claude asked (see the module)."""

    def __init__(self, leases: Leases) -> None:
        self.leases = leases
        self._heard: dict[str, anyio.Event] = {}  # a session's answers changed (told by whichever instance)

    async def give(self, session: AgentSession, question_id: str, answers: Mapping[str, Any]) -> None:
        """Answer a question the session asked: refused (QuestionError) when it has an answer or was never asked,
        (InputError) when the answers are not what claude can take for it (`checked`), the question still waiting."""
        known = isinstance(question_id, str) and QUESTION_ID.fullmatch(question_id)  # else never asked
        asked = await self.leases.questions(session.id, question_id) if known else None
        if asked is None or not await self.leases.answer(session.id, question_id, checked(asked, answers)):
            raise QuestionError(
                f"question {str(question_id)[:64]} is not waiting for an answer (answered, timed out, or never asked)"
            )

    async def wait(self, session: AgentSession, question_id: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109 - None when none came: not an error
        """A question's answers, given on whichever instance (None: none came in `timeout` seconds)."""
        deadline = anyio.current_time() + timeout
        while True:
            heard = self._heard.setdefault(session.id, anyio.Event())
            closed, answers = await self.leases.answer_of(session.id, question_id)
            if closed:
                return answers
            if anyio.current_time() >= deadline:
                if await self.leases.answer(session.id, question_id, None):
                    return None
                continue  # answered just now
            with anyio.move_on_after(min(2.0, max(0.0, deadline - anyio.current_time()))):
                await heard.wait()  # (a missed notification costs at most two seconds)
            if heard.is_set() and self._heard.get(session.id) is heard:
                self._heard[session.id] = anyio.Event()

    def heard(self, session_id: str) -> None:
        """The session's answers changed (a notification, from whichever instance): its waits look again."""
        if session_id in self._heard:
            self._heard[session_id].set()
