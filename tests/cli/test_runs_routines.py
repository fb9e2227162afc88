"""`frobozz runs show` of a routine's firing: which process fired it, and no game's `won` (real Postgres)."""

import json
import os
import socket

import anyio


def fired(cortex_settings, key, run_id):
    """A firing of routine `tick` under `key` started in this process (as a worker's or `routine run`'s is), and
    its run, finished."""
    from frobozz.memory import MemorySettings
    from frobozz.routines import RoutineStore, routine
    from frobozz.routines._fire import run_info
    from frobozz.runner import RunLedger

    async def main():
        settings = MemorySettings(database_url=cortex_settings.database_url)
        store, ledger = await RoutineStore.open(settings), await RunLedger.open(settings)
        try:
            info = run_info(routine(name="tick", kind="every", every=60, prompt="Tick."), run_id, "due 1")
            await store.claim("tick", key, "due 1")
            await store.start("tick", key, run_id)
            await ledger.add(info, queued=False)
            info.status, info.reason, info.turns = "finished", "finished", 1
            await ledger.save(info)
            await store.finish("tick", key, "done", "finished")
        finally:
            await ledger.aclose()
            await store.aclose()

    anyio.run(main)


def test_a_run_no_routine_fired_is_still_played_where_it_was_started(cli, cortex_settings):
    from dataclasses import replace

    from frobozz.memory import MemorySettings
    from frobozz.routines import routine
    from frobozz.routines._fire import run_info
    from frobozz.runner import RunLedger

    async def main():
        ledger = await RunLedger.open(MemorySettings(database_url=cortex_settings.database_url))
        try:
            info = run_info(routine(name="x", kind="every", every=60, prompt="x"), "20261130-073001-aaaaaa", "Zork")
            await ledger.add(replace(info, game="zork1", mode="text"), queued=False)
        finally:
            await ledger.aclose()

    anyio.run(main)
    shown = cli("runs", "show", "20261130-073001-aaaaaa")
    assert "none: played where it was started, not queued" in shown and "n/a" not in shown
    assert json.loads(cli("runs", "show", "20261130-073001-aaaaaa", "--json"))["firing"] is None


def test_a_run_a_worker_fired_for_a_routine_names_the_worker_and_has_no_won(cli, cortex_settings):
    """It said `worker  none: played where it was started, not queued` (a worker fired it) and `won  no` (a
    routine's firing is not a game)."""
    cli("routine", "add", "tick", "--every", "60", "--prompt", "Tick.")
    fired(cortex_settings, "20261130T073000Z", "20261130-073001-abcdef")
    shown = cli("runs", "show", "20261130-073001-abcdef")
    here = f"{socket.gethostname()}:{os.getpid()}"
    assert f"{here}, firing routine tick" in shown and "played where it was started" not in shown, shown
    assert "n/a (a routine's firing, not a game)" in shown and " no\n" not in shown, shown
    row = json.loads(cli("runs", "show", "20261130-073001-abcdef", "--json"))
    assert row["won"] is None and (row["firing"]["routine"], row["firing"]["worker"]) == ("tick", here)


def test_a_run_fired_by_hand_says_so_and_where(cli, cortex_settings):
    from frobozz.routines import BY_HAND

    cli("routine", "add", "tick", "--every", "60", "--prompt", "Tick.")
    fired(cortex_settings, f"{BY_HAND}20261130T073000-ab12", "20261130-073001-b0b0b0")
    shown = cli("runs", "show", "20261130-073001-b0b0b0")
    here = f"{socket.gethostname()}:{os.getpid()}"
    assert f"none: fired by hand (`routine run tick`) on {here}" in shown, shown
