"""Two drivers: instance A's lease on a session lapses mid-turn (its lease keeper is late) and instance B takes the
session over, while A's claude is still in the middle of the turn. Two in-process services on the real Postgres,
the real claude CLI and a scripted model whose replies to "held" wait until the test lets them go, so the order is
the test's, not the machine's load: A's model request is held, A's keeper is stalled, the lease row is expired in
SQL, and B (started then) takes the session up.

What the lease cannot prevent, and these tests show: for a while both claudes run (B starts its own as soon as it
holds the lease; A does not know yet). What it must, and these tests prove: A stops its claude once it learns (from
its keeper, or from its first write refused), at once, not letting it finish the turn; nothing A says after B took
the lease is kept (no event, no message in the conversation, no done, no second answer), the log's numbers have no
gap and no duplicate, the turn cut short is said once (an error), and the message is answered once, by B.

The window is bounded all the same: an instance that could not renew a lease within lease_ttl stops that session's
claude on its own, when the lease may lapse in the database (the last test). A's lease_ttl is long in the others,
so that their window lasts as long as they need it to."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio
import pytest

from frobozz.agent import Agent, Done, Error, TextDelta
from frobozz.agent._session import AgentSession
from frobozz.engine.testing import Reply, ScriptedModel, Text
from tests.agent.conftest import model_reply
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
LIMIT = 60  # seconds any one wait of these tests may take


class Held:
    """The scripted model: its replies to "held" in the order they are asked for (A's claude first, then B's),
    each waiting until the test lets it go (`go[n]`); `asked[n]` is set when the nth request has come."""

    def __init__(self) -> None:
        self.asked = [threading.Event() for _ in range(4)]
        self.go = [threading.Event() for _ in range(4)]
        self.delay = [0.0] * 4
        self._count = 0
        self._lock = threading.Lock()

    def __call__(self, request):
        if request.tool_results() or request.last_user_text().strip().rsplit("\n", 1)[-1] != "held":
            return model_reply(request)
        with self._lock:
            n, self._count = self._count, self._count + 1
        self.asked[n].set()
        self.go[n].wait(LIMIT * 2)  # (bounded: a test that failed must not keep the server's thread)
        text = f"driver {n + 1} answers. " + "And a longer answer so that it streams in pieces. " * 3
        return Reply((Text(text),), delay=self.delay[n])

    def let_all_go(self) -> None:
        for event in self.go:
            event.set()


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
async def scripted(held):  # (the conftest's `make_agent` takes its model from here)
    async with ScriptedModel(held) as model:
        try:
            yield model
        finally:
            held.let_all_go()


@dataclass
class TakenOver:
    a: Agent
    b: Agent
    on_a: AgentSession  # the session as A has it (A's driver, mid-turn)
    on_b: AgentSession  # the session as B has it (B's driver, its claude asking the model)
    session: str
    message: str  # the message id of the turn cut short
    token_a: int
    keeper_back: anyio.Event  # set: A's lease keeper renews again


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:  # (a zombie is no running claude)
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def waited(predicate) -> None:
    with anyio.fail_after(LIMIT):
        await eventually(predicate, interval=0.02)


@asynccontextmanager
async def taken_over(make_agent, held: Held, monkeypatch) -> AsyncIterator[TakenOver]:
    """A runs a turn on "held" and its model request waits; A's keeper stalls, the lease lapses, and B, started
    then, takes the session and answers the message again: yielded once B's claude has asked the model too."""
    async with AsyncExitStack() as stack:
        stack.callback(held.let_all_go)  # (before the services close: no claude waits on the model then)
        a = await stack.enter_async_context(make_agent(lease_ttl=120, shutdown_timeout=10))  # (not let go on its own)
        session = await a.create_session("alice/notes")
        on_a = await a.session(session)
        message = await a.post_message(on_a, "held")
        await waited(held.asked[0].is_set)  # A's claude is mid-turn: its model request held
        token_a = on_a.relay.token
        assert token_a is not None and on_a.engine is not None

        keeper_back, renew = anyio.Event(), a.leases.renew

        async def late(tokens) -> dict[str, int]:
            await keeper_back.wait()
            return await renew(tokens)

        monkeypatch.setattr(a.leases, "renew", late)  # A's keeper: late from its next round on
        stack.callback(keeper_back.set)
        lapsed = await a.store.pool.fetchval(
            "UPDATE agent_leases SET expires = now() - interval '1 second' WHERE session_id = $1 RETURNING token",
            session,
        )
        assert lapsed == token_a

        b = await stack.enter_async_context(make_agent(lease_ttl=60, shutdown_timeout=10))  # its keeper claims it
        await waited(held.asked[1].is_set)  # B's claude asks the model for the same message
        on_b = await b.session(session)
        assert on_b.relay.token is not None and on_b.relay.token > token_a and on_b.engine is not None
        # the window the lease cannot close: A does not know yet, and its claude still runs its turn
        assert on_a.relay.token == token_a and on_a.engine is not None and alive(on_a.engine.pid)
        yield TakenOver(a, b, on_a, on_b, session, message, token_a, keeper_back)


async def done_on(agent: Agent, session: str, message: str) -> Done:
    with anyio.fail_after(LIMIT):
        async for logged in agent.follow(session):
            if isinstance(logged.event, Done) and logged.event.message_id == message:
                return logged.event
    raise AssertionError("the relay closed before the turn's done")


async def answered_once_by_b(t: TakenOver) -> None:
    """What the database says once it is over: B's answer, once; nothing of A's after the take-over."""
    assert t.b.store is not None
    events = await t.b.store.events(t.session)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no gap, no number twice
    dones = [e.event for e in events if isinstance(e.event, Done)]
    assert [(d.message_id, (d.result or "")[:16]) for d in dones] == [(t.message, "driver 2 answers")]
    said = "".join(e.event.text for e in events if isinstance(e.event, TextDelta))
    assert "driver 1" not in said and said.startswith("driver 2 answers")
    errors = [e.event.message for e in events if isinstance(e.event, Error)]
    assert len(errors) == 1 and "took the session over" in errors[0]  # the turn cut short, said once
    assert [e.seq for e in events] == [e.seq for e in t.on_b.relay.log]  # what B's followers read is the log
    messages = await t.b.store.messages(t.session)
    assert [(m["role"], m["content"][:16], m["message_id"]) for m in messages] == [
        ("user", "held", t.message),
        ("agent", "driver 2 answers", t.message),
    ]
    pool = t.b.store.pool
    assert await pool.fetchval("SELECT bool_and(done) FROM agent_inbox WHERE session_id = $1", t.session)
    assert await pool.fetchval("SELECT token FROM agent_leases WHERE session_id = $1", t.session) == t.on_b.relay.token


async def test_a_lease_lost_mid_turn_stops_the_first_claude_when_its_keeper_comes_back_and_b_answers_once(
    make_agent, held, monkeypatch
):
    """A's claude stays silent (its model reply held): only its keeper can tell it the lease is gone. Then its claude
    is stopped at once, not let finish the turn (its close would wait for that: 60 s here)."""
    monkeypatch.setenv("FROBOZZ_CLOSE_TIMEOUT", "60")
    held.go[1].set()  # B's reply comes at once
    async with taken_over(make_agent, held, monkeypatch) as t:
        done = await done_on(t.b, t.session, t.message)
        assert done.result is not None and done.result.startswith("driver 2 answers")
        pid = t.on_a.engine.pid if t.on_a.engine is not None else None
        assert t.on_a.relay.token == t.token_a and pid is not None and alive(pid)  # both ran at once, till now
        written = await t.b.store.events(t.session)
        t.keeper_back.set()  # A's keeper renews again: the lease is not among its own any more
        t.a._placement.look_for_claims()  # (its next round now, not in 40 s; it has A's followers catch up at once)
        await waited(lambda: t.on_a.relay.token is None)
        with anyio.fail_after(10):  # A's followers read what B wrote, at once (not at the keeper's next round)
            await eventually(lambda: t.on_a.relay.log == written, interval=0.02)
        with anyio.fail_after(10):  # stopped at once, mid-turn
            await eventually(lambda: t.on_a.engine is None and not alive(pid), interval=0.02)
        held.go[0].set()  # A's model reply, to a claude that is gone
        await answered_once_by_b(t)


async def test_a_lease_lost_mid_turn_stops_the_first_claude_at_its_first_refused_write_and_b_answers_once(
    make_agent, held, monkeypatch
):
    """A's model reply comes (slowly) while its keeper is still late: its first event is refused, which tells it."""
    held.delay[0] = 0.05  # A's reply streams in pieces
    async with taken_over(make_agent, held, monkeypatch) as t:
        pid = t.on_a.engine.pid if t.on_a.engine is not None else None
        assert pid is not None
        held.go[0].set()
        # its claude stopped mid-reply, its turn over (it said nothing that was kept: see below)
        await waited(lambda: t.on_a.relay.token is None and t.on_a.engine is None and t.on_a.current is None)
        assert not alive(pid)
        held.go[1].set()
        done = await done_on(t.b, t.session, t.message)
        assert done.result is not None and done.result.startswith("driver 2 answers")
        await answered_once_by_b(t)


async def test_a_lease_lost_mid_turn_keeps_nothing_of_the_first_drivers_answer_when_it_learns_only_after_its_turn(
    make_agent, held, monkeypatch
):
    """Under load A's writes are slow to come back: A's claude ends its turn before A is told its first event was
    refused, and B's own answer comes only after. Nothing A said may be kept, the conversation's answer included."""
    async with taken_over(make_agent, held, monkeypatch) as t:
        assert t.a.leases is not None
        writes_back, log = anyio.Event(), t.a.leases.log

        async def slow(*args, **kwargs) -> None:
            await writes_back.wait()
            await log(*args, **kwargs)

        monkeypatch.setattr(t.a.leases, "log", slow)
        pid = t.on_a.engine.pid if t.on_a.engine is not None else None
        assert pid is not None
        held.go[0].set()  # A's claude answers the whole turn
        await waited(lambda: t.on_a.current is None)  # A's driver is through its turn, its writes on their way
        writes_back.set()  # refused: that tells A
        await waited(lambda: t.on_a.relay.token is None and t.on_a.engine is None and not alive(pid))
        held.go[1].set()
        done = await done_on(t.b, t.session, t.message)
        assert done.result is not None and done.result.startswith("driver 2 answers")
        await answered_once_by_b(t)


async def test_an_instance_that_cannot_renew_a_lease_stops_its_claude_itself_and_the_message_is_answered_once(
    make_agent, held, monkeypatch, caplog
):
    """A's keeper cannot reach the database (its renewal hangs) while A's claude is mid-turn. No other instance has
    told A anything, and none can before the lease lapses: A stops its claude on its own when the lease may lapse,
    and does not renew it when the database is back (the renewal under way when it stopped, which renewed it after
    all, is undone: the lease given up). The message is answered once, by whichever instance takes the session up
    then (A itself here, the only one)."""
    held.go[1].set()  # the second claude's reply comes at once
    caplog.set_level(logging.INFO, "frobozz.agent")
    async with make_agent(lease_ttl=3, shutdown_timeout=10) as a:  # its keeper: every 1 s
        session = await a.create_session("alice/notes")
        on_a = await a.session(session)
        message = await a.post_message(on_a, "held")
        await waited(held.asked[0].is_set)  # A's claude is mid-turn: its model request held
        token = on_a.relay.token
        pid = on_a.engine.pid if on_a.engine is not None else None
        assert token is not None and pid is not None
        keeper_back, renew, release = anyio.Event(), a.leases.renew, a.leases.release
        renewing, given_up = [], []

        async def hanging(tokens) -> dict[str, int]:
            renewing.append(set(tokens))
            await keeper_back.wait()
            return await renew(tokens)

        async def recorded(session_id, lease, *, force=False) -> bool:
            gone = await release(session_id, lease, force=force)
            given_up.append((session_id, lease, gone))
            return gone

        monkeypatch.setattr(a.leases, "renew", hanging)
        monkeypatch.setattr(a.leases, "release", recorded)
        a._placement.look_for_claims()  # its keeper's next round now (under load, it could come after the fence)
        try:
            await waited(lambda: renewing)
            assert token in renewing[0]  # a renewal of the lease under way, which does not come back
            await waited(lambda: on_a.relay.token is None and on_a.engine is None and not alive(pid))
            assert "its lease was not renewed within 3 s" in caplog.text
            # and, its lease lapsed in the database, A takes the session up no more than another would: not while
            # its renewals do not come back (it took it, ran it, and the fence stopped it a lease_ttl later, again)
            await waited(lambda: "not taken up here: this instance's leases are not being renewed" in caplog.text)
            assert not held.asked[1].is_set()
        finally:
            keeper_back.set()
        await waited(lambda: (session, token, True) in given_up)  # renewed by it, and given up at once
        done = await done_on(a, session, message)
        assert done.result is not None and done.result.startswith("driver 2 answers")
        held.go[0].set()  # the first claude's reply, to a claude that is gone
        assert a.store is not None
        events = await a.store.events(session)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        dones = [e.event for e in events if isinstance(e.event, Done)]
        assert [(d.message_id, (d.result or "")[:16]) for d in dones] == [(message, "driver 2 answers")]
        errors = [e.event.message for e in events if isinstance(e.event, Error)]
        assert len(errors) == 1 and "took the session over" in errors[0]  # the turn cut short, said once
        taken = await a.store.pool.fetchval("SELECT token FROM agent_leases WHERE session_id = $1", session)
        assert taken is not None and taken > token  # claimed anew: the lapsed lease was not renewed


@pytest.mark.parametrize("stalled", ["user", "agent"], ids=["its message stalled", "its answer stalled"])
async def test_a_driver_whose_lease_was_lost_stops_at_once_and_the_session_taken_up_again_here_answers_once(
    make_agent, held, monkeypatch, stalled
):
    """Two drivers on one instance: the first waits on a write (the user's message, or its claude's answer) to a
    slow database while the lease is lost, and this instance takes the session up again under a new token, with a
    new driver. The first driver went on when its write came back, with the session's state the two share: it sent
    its message into the new driver's claude, kept its done beside the new one (under the new lease), and ended the
    new turn's state. It is stopped where it is now, and the new driver starts only once it has ended."""
    held.go[0].set()
    held.go[1].set()
    order: list[str] = []
    async with make_agent(lease_ttl=120, shutdown_timeout=10) as a:
        assert a.store is not None
        session = await a.create_session("alice/notes")
        on_a = await a.session(session)
        add_message, stalls = a.store.add_message, []

        async def stalling_once(session_id, role, content, message_id, token, **kw):
            if role == stalled and not stalls:
                stalls.append(token)
                try:
                    await anyio.sleep_forever()  # (a write on a connection that does not come back)
                except anyio.get_cancelled_exc_class():
                    order.append("first driver stopped")
                    raise
            await add_message(session_id, role, content, message_id, token, **kw)

        monkeypatch.setattr(a.store, "add_message", stalling_once)
        message = await a.post_message(on_a, "held")
        await waited(lambda: stalls)  # the first driver waits on its write
        first = on_a.relay.token
        await a.store.pool.execute("DELETE FROM agent_leases WHERE session_id = $1", session)  # (it lapsed)
        a._placement.look_for_claims()  # lost; then unclaimed, and taken up again here
        await waited(lambda: on_a.relay.token not in (None, first))
        order.append("taken up again")
        done = await done_on(a, session, message)
        await waited(lambda: on_a.current is None and not on_a.busy)
        events = await a.store.events(session)
        messages = await a.store.messages(session)
    assert order == ["first driver stopped", "taken up again"]
    asked = sum(e.is_set() for e in held.asked)
    answer = f"driver {asked} answers"  # (its claude asked the model once, or twice: the first one's, then this)
    assert asked == (1 if stalled == "user" else 2)  # the message was sent to a claude once for each driver
    assert done.result is not None and done.result.startswith(answer)
    dones = [e.event for e in events if isinstance(e.event, Done)]
    assert [(d.message_id, (d.result or "")[:16]) for d in dones] == [(message, answer)]
    assert [(m["role"], m["content"][:16]) for m in messages] == [("user", "held"), ("agent", answer)]


async def test_a_session_handed_over_at_shutdown_keeps_its_lease_until_its_claude_is_gone(
    make_agent, held, monkeypatch
):
    """An instance stopping stops its sessions' claudes (a turn under way is cut short: its claude is stopped, not
    let finish it), then hands their leases over: until then no other instance may resume a transcript still being
    written. The lease is renewed while the claude closes; it lapsed a lease_ttl after the hand-over began (only
    held sessions were renewed)."""
    monkeypatch.setenv("FROBOZZ_CLOSE_TIMEOUT", "60")  # claude, its stdin closed, would finish its turn first
    kept: list = []
    given_up: list = []
    closes: list[bool] = []
    async with anyio.create_task_group() as tg:
        async with make_agent(lease_ttl=1.5, shutdown_timeout=60) as a:  # its keeper: every 0.5 s
            session = await a.create_session("alice/notes")
            on_a = await a.session(session)
            await a.post_message(on_a, "held")
            await waited(held.asked[0].is_set)  # A's claude is mid-turn: its model request held
            token, engine = on_a.relay.token, on_a.engine
            assert token is not None and engine is not None and a.leases is not None and a.store is not None
            renew, release, close, renewed, pool = a.leases.renew, a.leases.release, engine.close, [], a.store.pool
            closing = anyio.Event()  # set: the claude's close goes on

            async def counted(tokens) -> dict[str, int]:
                held_now = await renew(tokens)
                if not on_a.owned:  # (the hand-over has begun)
                    renewed.append(held_now.get(session))
                return held_now

            async def recorded(session_id, lease, *, force=False) -> bool:
                gone = await release(session_id, lease, force=force)
                given_up.append((session_id, lease, gone))
                return gone

            async def slow_close(*, finish: bool = True) -> None:
                closes.append(finish)
                await closing.wait()
                await close(finish=finish)

            async def while_it_closes() -> None:
                await waited(lambda: renewed.count(token) >= 4)  # more than a lease_ttl, its claude still closing
                kept.append(await pool.fetchval("SELECT token FROM agent_leases WHERE session_id = $1", session))
                kept.append(list(given_up))
                closing.set()  # its claude is stopped: then the lease is handed over

            monkeypatch.setattr(a.leases, "renew", counted)
            monkeypatch.setattr(a.leases, "release", recorded)
            monkeypatch.setattr(engine, "close", slow_close)
            tg.start_soon(while_it_closes)
        # (A has stopped here: it handed the session over)
    assert kept == [token, []]
    assert given_up == [(session, token, True)]
    assert closes[0] is False and not alive(engine.pid)  # stopped, not let finish its turn (its model still held)


async def test_a_session_mid_turn_when_its_instance_stops_is_handed_over_at_once_and_answered_once_by_another(
    make_agent, held, monkeypatch
):
    """SIGTERM mid-turn hands the session over at once, as for an idle one: nothing A's claude would still say is
    kept (A let the session go first), so it is stopped, not let finish the turn, and the lease is handed over as
    soon as it is gone. B answers the message again, once, though A's lease would last 10 minutes and A's claude,
    its stdin closed, would go on with its turn (its model request is held until B has asked too)."""
    monkeypatch.setenv("FROBOZZ_CLOSE_TIMEOUT", "600")
    stop_a, stopped = anyio.Event(), anyio.Event()

    async def run_a(*, task_status) -> None:
        async with make_agent(lease_ttl=600, shutdown_timeout=600) as a:
            session = await a.create_session("alice/notes")
            on_a = await a.session(session)
            message = await a.post_message(on_a, "held")
            await waited(held.asked[0].is_set)  # A's claude is mid-turn: its model request held
            assert on_a.relay.token is not None and on_a.engine is not None
            task_status.started((a, on_a, session, message, on_a.relay.token, on_a.engine.pid))
            await stop_a.wait()
        stopped.set()

    async with anyio.create_task_group() as tg:
        a, on_a, session, message, token_a, pid = await tg.start(run_a)
        async with make_agent(lease_ttl=60, shutdown_timeout=10) as b:  # (started once A holds the session)
            stop_a.set()  # A stops, as SIGTERM stops it
            try:
                await waited(held.asked[1].is_set)  # B's claude asks the model for the same message
            finally:
                held.let_all_go()  # (A's claude has gone, or, failing, is let finish its turn, and A stop)
            with anyio.fail_after(LIMIT):
                await stopped.wait()
            assert not alive(pid)
            done = await done_on(b, session, message)
            assert done.result is not None and done.result.startswith("driver 2 answers")
            on_b = await b.session(session)
            await answered_once_by_b(TakenOver(a, b, on_a, on_b, session, message, token_a, stopped))


async def test_a_claim_that_outlasts_its_lease_while_renewals_fail_is_given_up_not_run(
    make_agent, held, monkeypatch, caplog
):
    """The database is slow (a claim's reads take longer than a lease lasts) and renewals do not come back: the
    lease a claim took may have lapsed by its end, and another instance may hold the session. Such a claim is not
    run (its claude started, only to be stopped by the fence at once); the lease is given up and the next claim,
    once renewals come back, answers the message."""
    held.go[0].set()
    async with make_agent(lease_ttl=1.5) as a:  # its keeper: every 0.5 s
        assert a.store is not None and a.leases is not None
        session = await a.create_session("alice/notes")
        on_a = await a.session(session)
        keeper_back, renew, last_tool_call = anyio.Event(), a.leases.renew, a.store.last_tool_call

        async def hanging(tokens) -> dict[str, int]:
            await keeper_back.wait()
            return await renew(tokens)

        async def slow(session_id) -> int:
            await anyio.sleep(2)  # (a database slower than a lease lasts)
            return await last_tool_call(session_id)

        monkeypatch.setattr(a.leases, "renew", hanging)
        monkeypatch.setattr(a.store, "last_tool_call", slow)
        message = await a.post_message(on_a, "held")
        try:
            await waited(lambda: "its claim took longer than a lease lasts (1.5 s)" in caplog.text)
            assert not held.asked[0].is_set() and not on_a.owned
        finally:
            keeper_back.set()
        done = await done_on(a, session, message)
        assert done.result is not None and done.result.startswith("driver 1 answers")
    assert "its lease was not renewed" not in caplog.text


async def test_an_answer_kept_before_its_turn_was_cut_short_is_replaced_by_the_answer_given_again(
    make_agent, held, monkeypatch
):
    """The first driver's answer is in the conversation, but its done is not yet written when the lease is lost
    (the fence cuts at its own deadline, before the database's). The turn is answered again under the next lease:
    the conversation kept the first answer (a second for the turn was refused), the event log the second."""
    held.go[0].set()
    held.go[1].set()
    async with make_agent(lease_ttl=120, shutdown_timeout=10) as a:
        assert a.store is not None and a.leases is not None
        session = await a.create_session("alice/notes")
        on_a = await a.session(session)
        log, holding, written_back = a.leases.log, anyio.Event(), anyio.Event()

        async def holding_the_first_done(session_id, token, events):
            if any(isinstance(e.event, Done) and (e.event.result or "").startswith("driver 1") for e in events):
                holding.set()
                await written_back.wait()  # (refused then: the lease is another's)
            await log(session_id, token, events)

        monkeypatch.setattr(a.leases, "log", holding_the_first_done)
        message = await a.post_message(on_a, "held")
        with anyio.fail_after(LIMIT):
            await holding.wait()  # its answer in the conversation, its done on the way
        assert [m["role"] for m in await a.store.messages(session)] == ["user", "agent"]
        first = on_a.relay.token
        await a.store.pool.execute("DELETE FROM agent_leases WHERE session_id = $1", session)  # (it lapsed)
        a._placement.look_for_claims()  # lost; then unclaimed, and taken up again here
        await waited(lambda: on_a.relay.token not in (None, first))
        written_back.set()
        done = await done_on(a, session, message)
        assert done.result is not None and done.result.startswith("driver 2 answers")
        messages = await a.store.messages(session)
    assert [(m["role"], m["content"][:16]) for m in messages] == [("user", "held"), ("agent", "driver 2 answers")]


async def test_a_claude_let_go_while_its_lease_is_given_up_slowly_is_kept_for_a_message_that_came_meanwhile(
    make_agent, held, monkeypatch
):
    """An idle session's claude is let go (its idle timeout, or room for another): its lease is given up first,
    unless messages wait. A message that came while that was on its way was answered by a claude then released
    under it, mid-turn: the turn failed ("claude's stream ended")."""
    held.go[1].set()
    async with make_agent(lease_ttl=120, shutdown_timeout=10) as a:
        assert a.store is not None and a.leases is not None
        session = await a.create_session("alice/notes")
        on_a = await a.session(session)
        first = await a.post_message(on_a, "hello there")
        await done_on(a, session, first)
        await waited(lambda: not on_a.busy and on_a.engine is not None)  # idle, its claude up
        release, asked, answer = a.leases.release, anyio.Event(), anyio.Event()

        async def slow(session_id, token, *, force=False) -> bool:
            asked.set()
            await answer.wait()
            return await release(session_id, token, force=force)

        monkeypatch.setattr(a.leases, "release", slow)
        async with anyio.create_task_group() as tg:
            tg.start_soon(a._placement._let_go, on_a)
            with anyio.fail_after(LIMIT):
                await asked.wait()
            message = await a.post_message(on_a, "held")  # its turn begins on the claude being let go
            await waited(held.asked[0].is_set)
            answer.set()  # not given up: a message waits (this one)
        held.go[0].set()
        done = await done_on(a, session, message)
    assert done.result is not None and done.result.startswith("driver 1 answers")
