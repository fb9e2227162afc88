"""What the plugin adds to a whole `claude -p`, its MCP servers started per claude (before: `python -m frobozz
plugin serve cortex|handoff`, two processes with the servers' imports, each claude) against served by the warm
memory daemon through the standard-library relay (after), and against `claude -p` without the plugin, in one
run, on the project's scripted model. The daemon is warm in both (a first prompt each, not counted); the
prompts alternate between the three set-ups so that the machine's load falls on each alike.

Run: .venv/bin/python bench/plugin_servers.py [--prompts 8]
Baseline (issue 33's first wave): +4.7 s p50 per `claude -p` with the plugin, mostly its servers starting.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _ending import end_with_the_bench
from memory_loop import model_process, pct
from plugin_hooks import claude_p

from frobozz.engine import find_claude
from frobozz.memory import MemorySettings
from frobozz.memory._database import stop_embedded
from frobozz.plugin import PluginSettings, install, stop_daemon


def line(name: str, values: list[float], extra: str = "") -> str:
    return f"{name:<40}: p50 {pct(values, 50):7.1f} ms, p95 {pct(values, 95):7.1f} ms (n={len(values)}){extra}"


def main(prompts: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="frobozz-plugin-servers-"))
    project = scratch / "bench"
    project.mkdir()
    setups: dict[str, dict[str, str]] = {}
    plugins: list[PluginSettings] = []
    try:
        for name, shared in (("per-claude", False), ("shared", True)):
            data, home = scratch / name / "data", scratch / name / "home"
            home.mkdir(parents=True)
            env = {**os.environ, "HOME": str(home), "FROBOZZ_DATA_DIR": str(data), "FROBOZZ_PLUGIN_IDLE": "900"}
            settings = PluginSettings(data_dir=data)
            old = dict(os.environ)
            os.environ.update(env)  # claude's plugin commands write into this HOME
            try:
                install(settings, "user", project, None, str(find_claude()), shared_servers=shared)
            finally:
                os.environ.clear()
                os.environ.update(old)
            setups[name], plugins = env, [*plugins, settings]
        bare = scratch / "bare"
        bare.mkdir()
        setups["none"] = {**os.environ, "HOME": str(bare)}
        timed: dict[str, list[float]] = {name: [] for name in setups}
        with model_process() as model:
            for env in setups.values():  # the daemons started, Postgres made, the model's first answer
                claude_p("Warm up, please.", {**env, **model}, project)
            for n in range(prompts):
                for name, env in setups.items():
                    timed[name].append(
                        claude_p(f"Question {n}: what did we note about the build?", {**env, **model}, project)
                    )
    finally:
        for settings in plugins:
            stop_daemon(settings.socket)
            stop_embedded(MemorySettings(data_dir=settings.data_dir), delete=True)
        shutil.rmtree(scratch, ignore_errors=True)

    none, before, after = (pct(timed[k], 50) for k in ("none", "per-claude", "shared"))
    print(f"claude -p, {prompts} prompts each, the daemon warm; noisy: a shared 2-core machine")
    print(line("without the plugin", timed["none"]))
    print(
        line(
            "plugin, servers per claude (before)",
            timed["per-claude"],
            f"  added p50 {before - none:+.0f} ms, ratio {before / none:.2f}x",
        )
    )
    print(
        line(
            "plugin, servers in the daemon (after)",
            timed["shared"],
            f"  added p50 {after - none:+.0f} ms, ratio {after / none:.2f}x",
        )
    )
    print(
        f"after / before (whole claude -p, p50): {after / before:.2f}x; what the plugin adds, after / before: "
        f"{(after - none) / (before - none):.2f}x"
        if before > none
        else ""
    )


if __name__ == "__main__":
    end_with_the_bench()  # the scratch Postgres goes with the bench
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    main(parser.parse_args().prompts)
