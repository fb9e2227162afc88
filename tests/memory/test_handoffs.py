"""Hand-off letters as spans: the letter kept (its memories embedded and stored under it) and read, with their
sizes and ids, never their text; a letter that is not there is a red read."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import StatusCode

from frobozz import _spans as S
from frobozz.memory import MemoryStoreError

pytestmark = pytest.mark.anyio
SUMMARY = "Mapped the white house; the lamp is lit."


async def test_a_letter_written_and_read_is_a_span_each_with_its_sizes_and_no_text(memory_service, spans):
    letters = await memory_service.handoffs()
    assert await letters.latest("zork") is None  # nothing written yet: a read that found nothing
    letter_id, memory_ids = await letters.write(
        SUMMARY,
        ["open the trap door"],
        ["The troll takes the sword once."],
        "zork",
        "7d6c2a4e-0000-4000-8000-000000000000",
    )
    assert (await letters.latest("zork")).id == letter_id
    with pytest.raises(MemoryStoreError):
        await letters.read(letter_id + 1000)
    finished = spans.get_finished_spans()
    [write] = [s for s in finished if s.name == S.HANDOFF_WRITE]
    assert write.attributes[S.HANDOFF_ID] == letter_id and list(write.attributes[S.MEMORY_IDS]) == memory_ids
    assert (write.attributes[S.HANDOFF_NEXT_STEPS], write.attributes[S.HANDOFF_MEMORIES]) == (1, 1)
    assert write.attributes[S.SESSION_ID] == "7d6c2a4e-0000-4000-8000-000000000000"
    empty, found, missing = [s for s in finished if s.name == S.HANDOFF_READ]
    assert S.HANDOFF_ID not in empty.attributes and empty.status.status_code is not StatusCode.ERROR
    assert found.attributes[S.HANDOFF_ID] == letter_id and found.attributes[S.HANDOFF_SUMMARY_CHARS] == len(SUMMARY)
    assert missing.status.status_code is StatusCode.ERROR
    text = json.dumps([dict(s.attributes or {}) for s in finished], default=str)
    assert "white house" not in text and "trap door" not in text and "troll" not in text
