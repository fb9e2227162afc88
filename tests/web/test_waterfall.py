"""A run's page draws its traces as a waterfall from the spans kept in Postgres (--trace), in a real browser;
a run with none kept shows none."""

import json
import os
import subprocess
import sys

from tests.otlp import receiver
from tests.web.conftest import new_run, screenshot


def test_a_run_or_a_session_with_no_kept_spans_has_no_waterfall(client, web_settings):
    new_run(web_settings.runs_dir)
    page = client.get("/runs/20261123-120000-abc123")
    assert page.status_code == 200 and 'id="waterfall"' not in page.text
    session = client.get("/traces/7d6c2a4e-0000-4000-8000-000000000000")
    assert session.status_code == 200 and 'id="no-traces"' in session.text
    assert client.get("/traces/" + "x" * 500).status_code == 400


def test_a_traced_run_s_page_shows_each_turn_s_waterfall_in_a_browser(page, site, web_settings, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "OTEL_"))}
    (tmp_path / "home").mkdir()
    with receiver() as backend:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "frobozz",
                "play",
                "zork1",
                "--player",
                "walkthrough",
                "--max-turns",
                "6",
                "--trace",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={
                **env,
                "HOME": str(tmp_path / "home"),
                "OTEL_EXPORTER_OTLP_ENDPOINT": backend.url,
                "FROBOZZ_DATABASE_URL": web_settings.database_url.get_secret_value(),
            },
        )
    assert done.returncode == 0, done.stderr[-2000:]
    run_id = next(p.name for p in web_settings.runs_dir.iterdir())
    page.goto(f"{site}/runs/{run_id}")
    traces = page.locator("#waterfall details.trace")
    assert traces.count() >= 6
    last = page.locator("#waterfall details.trace[open]")
    assert last.count() == 1
    labels = last.locator(".label").all_inner_texts()
    assert any(label.startswith("frobozz.turn") for label in labels)
    assert any(label.startswith("frobozz.game.act") for label in labels)
    first = traces.nth(1)
    first.locator("summary").click()
    shown = first.locator(".label").all_inner_texts()
    assert any(label.startswith("chat ") and " in, " in label for label in shown)  # tokens beside the request
    widths = first.locator(".bar").evaluate_all("bars => bars.map(b => b.getBoundingClientRect().width)")
    assert widths and all(w > 0 for w in widths)
    screenshot(page.locator("#waterfall"), tmp_path / "waterfall.png")
    session_id = json.loads((web_settings.runs_dir / run_id / "run.json").read_text())["claude_session_id"]
    page.goto(f"{site}/traces/{session_id}")  # the same session's traces, by its claude session id
    assert page.locator("#waterfall details.trace").count() == traces.count()
