"""Where sessions run: the lease keeper, woken by the listener as well as by its clock."""

import anyio
import pytest

from frobozz.agent._leases import Leases
from tests.database import admin, database_name
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_each_time_the_listener_listens_again_the_lease_keeper_looks_for_sessions_at_once(
    make_agent, postgres, cortex_settings, monkeypatch, caplog
):
    """Notices of sessions to take up are missed while the listening connection is down: once it listens again,
    the keeper must catch up then, not at its next tick (a third of lease_ttl: 100 s here)."""
    rounds = 0
    renew = Leases.renew

    async def counted(self: Leases, tokens: list[int]) -> dict[str, int]:
        nonlocal rounds
        rounds += 1
        return await renew(self, tokens)

    monkeypatch.setattr(Leases, "renew", counted)
    name = database_name(cortex_settings)
    async with make_agent(lease_ttl=300):
        with anyio.fail_after(30):
            await eventually(lambda: rounds >= 2)  # its first round, and the one the first listen woke
        await admin(
            postgres,
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND query LIKE 'LISTEN%'",
        )
        with anyio.fail_after(30):  # the listener waits 1 s, listens again, and wakes the keeper
            await eventually(lambda: rounds >= 3)
    assert "the connection listening for other instances was lost; listening again" in caplog.text
    assert "released back to the pool" not in caplog.text  # (what it said: the lost connection asked if closed)


async def test_a_renewal_the_database_never_answers_is_given_up_and_the_next_one_renews(
    make_agent, monkeypatch, caplog
):
    """A connection stuck on a peer that is gone: the renewal waited for TCP to notice (minutes), every lease lapsed
    meanwhile and nothing was taken up. It is given up after two lease_ttls, and the next round asks again."""
    rounds = 0
    renew = Leases.renew

    async def stuck_once(self: Leases, tokens: list[int]) -> dict[str, int]:
        nonlocal rounds
        rounds += 1
        if rounds == 2:  # (the first round passes: the service starts)
            await anyio.sleep_forever()
        return await renew(self, tokens)

    monkeypatch.setattr(Leases, "renew", stuck_once)
    async with make_agent(lease_ttl=1.5):
        with anyio.fail_after(30):
            await eventually(lambda: rounds >= 3)
    assert "the agent's leases not renewed: the database did not answer in time" in caplog.text


def test_a_lease_shorter_than_a_second_is_refused_as_a_setting():
    """Renewed every third of it, and let go by the fence when a renewal is late: under a second, a busy event
    loop alone would let every session go."""
    from pydantic import ValidationError

    from frobozz.agent import AgentSettings

    with pytest.raises(ValidationError, match="lease_ttl"):
        AgentSettings(lease_ttl=0.2)
    assert AgentSettings(lease_ttl=1).lease_ttl == 1
