"""The summary table at the end of `play`: readable in 80 columns (a pipe's width), the run id never cut."""

from rich.console import Console

from frobozz.runner import RunResult
from frobozz.runner._live import summary_table


def _result(run_id: str, **extra) -> RunResult:
    return RunResult(
        run_id=run_id,
        game="zork1",
        player="walkthrough",
        mode="tools",
        score=35,
        max_score=350,
        moves=60,
        turns=60,
        won=False,
        done=False,
        reason="no command in replies",
        cost_usd=0.1234,
        transcript="/x/transcript.md",
        **extra,
    )


def test_the_summary_fits_80_columns_with_memory_and_the_run_ids_whole():
    results = [
        _result(
            "20261124-101010-abcdef",
            memory_namespace="zork1-long-namespace",
            memories_recalled=12,
            memories_stored=3,
            compactions=1,
            handoffs=1,
        ),
        _result("20261124-101011-123456"),
    ]
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    console.print(summary_table(results))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    for r in results:
        assert r.run_id in text
    assert (
        "35/350" in text and "$0.1234" in text and "zork1-lo" in text and "…" not in text
    )  # nothing cut, only wrapped
