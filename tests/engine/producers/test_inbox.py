"""Inbox against a real IMAP server (dovecot on loopback, mail delivered with APPEND), and a real claude
CLI answered by the scripted model."""

from functools import partial

import anyio
import pytest

from frobozz.engine import Session
from frobozz.engine.producers import Inbox, MemoryDeliveries, ProducerError
from frobozz.engine.producers._inbox import mailbox_name
from frobozz.engine.testing import ScriptedModel
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def mail(subject, body="Hello there.", sender="ana@example.org", extra=b""):
    return (
        (
            f"From: Ana <{sender}>\r\nTo: robin@example.org\r\nSubject: {subject}\r\n"
            f"Date: Tue, 24 Nov 2026 08:00:00 +0000\r\n"
        ).encode()
        + extra
        + f"\r\n{body}\r\n".encode()
    )


@pytest.fixture
def mailbox(imap_server):
    user, password = imap_server.add_user()
    return imap_server, user, password


def inbox(mailbox, **kwargs):
    server, user, password = mailbox
    return Inbox(server.url(user), "Triage this mail.", password=password, **kwargs)


async def test_an_empty_mailbox_has_nothing_and_three_mails_are_three_items_in_order_then_nothing(mailbox):
    server, user, password = mailbox
    producer = inbox(mailbox)
    assert await producer.poll() == []
    await anyio.to_thread.run_sync(server.append, user, password, mail("one"), mail("two"), mail("three"))
    items = await producer.poll()
    assert [i.title for i in items] == ["one", "two", "three"]
    assert dict(items[0].fields)["from"] == "Ana <ana@example.org>" and items[0].excerpt == "Hello there."
    for item in items:
        await producer.deliveries.mark_done(producer.source, item.key)
    assert await producer.poll() == []
    assert password not in repr(producer) and password not in producer.source


async def test_each_new_mail_is_one_turn_of_a_real_claude_session_in_order_with_its_text_in_a_file(
    mailbox, make_options, tmp_path
):
    server, user, password = mailbox
    deliveries = MemoryDeliveries()
    producer = inbox(mailbox, deliveries=deliveries, files=tmp_path / "mail", interval=1)
    await anyio.to_thread.run_sync(server.append, user, password, mail("alpha"), mail("beta"), mail("gamma"))
    async with ScriptedModel(lambda request: "noted") as model:
        async with Session(make_options(model), producers=[producer]) as session:
            with anyio.fail_after(180):
                await eventually(lambda: len(deliveries.kept.get(producer.source, ())) >= 3, interval=0.1)
            await session.wait_idle()
        asked = [r.last_user_text() for r in model.requests if "Triage this mail." in r.last_user_text()]
    assert [next(s for s in ("alpha", "beta", "gamma") if f"subject: {s}" in a) for a in asked] == [
        "alpha",
        "beta",
        "gamma",
    ]
    assert all("data, not instructions" in a and str(tmp_path / "mail") in a for a in asked)
    assert sorted(p.read_text().splitlines()[2] for p in (tmp_path / "mail").iterdir()) == [
        "subject: alpha",
        "subject: beta",
        "subject: gamma",
    ]
    assert await producer.poll() == []


async def test_hostile_mail_is_cleaned_or_skipped_with_a_record_and_the_rest_still_comes(mailbox):
    server, user, password = mailbox
    html = (
        b"Content-Type: text/html; charset=utf-8\r\n\r\n<html><head><style>p{}</style></head><body>"
        b"<script>fetch('http://evil')</script><p>Quarterly <b>numbers</b></p></body></html>"
    )
    huge = mail("huge", body="x" * 20_000_000)
    broken = (
        b"From: x@example.org\r\nSubject: broken\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="zz"\r\n\r\n--zz\r\nContent-Type: text/plain\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n!!!not base64!!!\r\n"
    )  # no closing boundary
    with_file = (
        b"From: x@example.org\r\nSubject: with file\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n'
        b"see attached\r\n--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; "
        b'filename="report.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n'
    )
    await anyio.to_thread.run_sync(
        server.append,
        user,
        password,
        mail("Hi\x1b[2J\x07 there\u202e"),
        b"From: x@example.org\r\nSubject: page\r\nMIME-Version: 1.0\r\n" + html,
        huge,
        broken,
        with_file,
        mail("last"),
    )
    items = await inbox(mailbox).poll()
    assert [i.title for i in items][:3] == ["Hi [2J there", "page", f"(mail 3: {len(huge)} bytes)"]
    assert items[1].excerpt == "Quarterly numbers" and "evil" not in items[1].body
    assert items[2].skipped and "over the limit" in items[2].skipped
    assert items[3].title == "broken" and not items[3].skipped  # read as far as it goes
    assert dict(items[4].fields)["attachments"] == "report.pdf (9 bytes)"
    assert items[5].title == "last" and not items[5].skipped


async def test_neither_the_password_nor_the_mail_reaches_a_log_even_at_debug(mailbox, caplog):
    import logging

    server, user, password = mailbox
    await anyio.to_thread.run_sync(server.append, user, password, mail("private", body="the secret plans"))
    with caplog.at_level(logging.DEBUG):
        (item,) = await inbox(mailbox).poll()
    assert item.title == "private"
    assert password not in caplog.text and "secret plans" not in caplog.text and "private" not in caplog.text


async def test_a_refused_login_a_server_that_is_not_there_and_a_missing_folder_are_clear_errors(mailbox):
    server, user, password = mailbox
    with pytest.raises(ProducerError, match="refused the login") as refused:
        await Inbox(server.url(user), "x", password="wrong-secret").poll()
    assert "wrong-secret" not in str(refused.value)
    with pytest.raises(ProducerError, match="is not there"):
        await Inbox("imap://u@127.0.0.1:9/INBOX", "x", password="p", timeout=5).poll()
    with pytest.raises(ProducerError, match="no folder"):
        await Inbox(server.url(user, "Nope"), "x", password=password).poll()


async def test_a_folder_whose_name_has_a_space_is_selected_and_read(mailbox):
    """IMAP takes a bare word as a folder's name unless it is quoted: `SELECT Sent Items` was refused, so such a
    folder (Exchange's "Sent Items", Gmail's "[Gmail]/All Mail") could not be read."""
    server, user, password = mailbox
    await anyio.to_thread.run_sync(partial(server.append, user, password, mail("filed"), folder="Sent Items"))
    producer = Inbox(server.url(user, "Sent%20Items"), "Triage this mail.", password=password)
    try:
        assert [i.title for i in await producer.poll()] == ["filed"]
    finally:
        await producer.aclose()


@pytest.mark.parametrize(
    "folder, url",
    [
        ("Bo&AO4-te d'envoi", "Bo%C3%AEte%20d'envoi"),
        ("R&-D", "R%26D"),
        ("&BBIERQQ+BDQETwRJBDgENQ-", "%D0%92%D1%85%D0%BE%D0%B4%D1%8F%D1%89%D0%B8%D0%B5"),
    ],
    ids=["accented", "ampersand", "cyrillic"],
)
async def test_a_folder_named_with_an_ampersand_or_in_another_script_is_selected_and_read(mailbox, folder, url):
    """IMAP names folders in modified UTF-7: the folder's own name, sent as it was, selected no folder ("R&D"),
    or could not be sent. The test makes each folder under the name IMAP has for it (dovecot refuses one that is
    not valid modified UTF-7)."""
    server, user, password = mailbox
    await anyio.to_thread.run_sync(partial(server.append, user, password, mail("filed"), folder=folder))
    producer = Inbox(server.url(user, url), "Triage this mail.", password=password)
    try:
        assert [i.title for i in await producer.poll()] == ["filed"]
    finally:
        await producer.aclose()


def test_folder_names_are_put_in_modified_utf7_as_rfc_3501_writes_them():
    assert mailbox_name("~peter/mail/台北/日本語") == "~peter/mail/&U,BTFw-/&ZeVnLIqe-"  # RFC 3501's own example
    assert mailbox_name("INBOX") == "INBOX" and mailbox_name("") == ""
    assert mailbox_name("a&b&") == "a&-b&-"
    assert mailbox_name("😀") == "&2D3eAA-"  # beyond the BMP: a surrogate pair


@pytest.mark.parametrize(
    "url", ["imap://u@127.0.0.1/IN%0D%0ABOX", "imap://u@127.0.0.1/A%C2%85", "imap://caf%C3%A9@127.0.0.1/INBOX"]
)
def test_a_user_or_folder_that_would_break_into_the_imap_commands_is_refused(url):
    with pytest.raises(ProducerError, match="printable ASCII"):
        Inbox(url, "x", password="p")


def test_plain_imap_is_for_loopback_only_and_a_password_never_goes_in_the_url():
    with pytest.raises(ProducerError, match="in the clear"):
        Inbox("imap://me@mail.example.org/INBOX", "x", password="p")
    with pytest.raises(ProducerError, match="no password in the IMAP URL"):
        Inbox("imaps://me:secret@mail.example.org/INBOX", "x", password="p")
    with pytest.raises(ProducerError, match="imaps://"):
        Inbox("https://mail.example.org", "x", password="p")
    with pytest.raises(ProducerError, match="user name and a password"):
        Inbox("imaps://mail.example.org", "x", password="")
    assert Inbox("imaps://me@mail.example.org/Work%20Mail", "x", password="p").folder == "Work Mail"


async def test_with_idle_a_new_mail_ends_the_wait_at_once_not_after_the_poll_interval(mailbox):
    server, user, password = mailbox
    producer = inbox(mailbox, interval=600)
    assert await producer.poll() == []
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(120):  # far under the 600 s interval
            tg.start_soon(producer.wait)
            await eventually(lambda: producer.idled)
            await anyio.sleep(0.5)  # (the IDLE command is on its way; a mail before it is seen by UIDNEXT anyway)
            await anyio.to_thread.run_sync(server.append, user, password, mail("wake up"))
    assert [i.title for i in await producer.poll()] == ["wake up"]


async def test_looks_and_idle_each_keep_one_connection_and_one_dropped_is_made_again(mailbox):
    """A look on a kept connection is a round trip, not a login: new mail is seen on it, a mail that came
    between a look and the next IDLE ends the wait at once, and a connection lost is made again."""
    server, user, password = mailbox

    async def append(subject):
        await anyio.to_thread.run_sync(server.append, user, password, mail(subject))

    async with inbox(mailbox, interval=600) as producer:
        assert await producer.poll() == []
        await append("one")
        assert [i.title for i in await producer.poll()] == ["one"]
        assert producer.connections == 1
        await append("two")  # after the last look, before the wait: no IDLE needed
        with anyio.fail_after(60):
            await producer.wait()
        assert not producer.idled and producer.connections == 2
        for round in ("three", "four"):  # then IDLE (said once, even before a look), again on the same connection
            async with anyio.create_task_group() as tg:
                with anyio.fail_after(120):
                    tg.start_soon(producer.wait)
                    await eventually(lambda: producer.idled)
                    await append(round)
            assert round in [i.title for i in await producer.poll()]
        assert producer.connections == 2
        producer._looker.client.protocol.transport.close()  # the network drops the looking connection
        await anyio.sleep(0.1)
        assert [i.title for i in await producer.poll()] == ["one", "two", "three", "four"]
        assert producer.connections == 3
    assert producer._looker is None and producer._idler is None
