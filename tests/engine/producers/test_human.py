import io

import pytest

from frobozz.engine.producers import HumanInput

pytestmark = pytest.mark.anyio


class FakeSession:
    def __init__(self):
        self.sent = []

    async def send(self, content):
        self.sent.append(content)


async def test_each_typed_line_becomes_one_message_and_blank_lines_are_skipped():
    session = FakeSession()
    await HumanInput(io.StringIO("look\n\n   \nopen the mailbox\r\n" + "x" * 50 + "\n"), max_chars=20).run(session)
    assert session.sent == ["look", "open the mailbox", "x" * 20]
