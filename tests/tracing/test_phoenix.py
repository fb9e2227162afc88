"""Walkthrough runs traced into a real backend (Arize Phoenix) and read back from its API: one trace per
turn, each model request a span with its tokens, each game tool call with the game server's own span under
it, and with content capture off, none of the game's text anywhere."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections import Counter

from frobozz import _spans as S
from tests.tracing.conftest import wait_for_spans

GAME_TEXT = ("West of House", "small mailbox", "ZORK I")  # what Zork says in the first turns


def _play(phoenix: str, project: str, *args: str) -> dict:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "FROBOZZ_TRACE_KEEP_DAYS": "0",
    }  # (no embedded Postgres started)
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "play", "zork1", "--player", "walkthrough", "--trace", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _named(spans: list[dict], name: str) -> list[dict]:
    return [s for s in spans if s["name"] == name or s["name"].startswith(name + " ")]


def test_a_text_mode_walkthrough_is_a_trace_per_turn_with_its_model_request_and_no_game_text(phoenix):
    project = f"text-{secrets.token_hex(4)}"
    result = _play(phoenix, project, "--max-turns", "20")
    assert result["turns"] == 20
    spans = wait_for_spans(phoenix, project, lambda s: len(_named(s, S.SESSION)) == 1 and len(_named(s, S.TURN)) >= 21)
    turns = [t for t in _named(spans, S.TURN) if t["attributes"][S.TURN_OUTCOME] != "unsent"]
    assert len(turns) == 20 and len({t["context"]["trace_id"] for t in turns}) == 20  # a trace each
    assert all(t["parent_id"] is None and t["status_code"] != "ERROR" for t in turns)
    [session] = _named(spans, S.SESSION)
    assert session["attributes"][S.RUN_ID] == result["run_id"] and session["attributes"][S.SESSION_ID]
    assert {t["attributes"][S.SESSION_ID] for t in turns} == {session["attributes"][S.SESSION_ID]}

    chats = _named(spans, S.CHAT)
    by_trace = Counter(c["context"]["trace_id"] for c in chats)
    assert all(by_trace[t["context"]["trace_id"]] == 1 for t in turns)  # each turn: its one model request
    assert all(
        c["attributes"][S.GEN_AI_INPUT_TOKENS] > 0 and c["attributes"][S.GEN_AI_OUTPUT_TOKENS] > 0 for c in chats
    ), chats[0]
    acts = _named(spans, S.GAME_ACT)
    assert len(acts) == 20 and all(S.GAME_MOVES in a["attributes"] for a in acts)

    exported = json.dumps(spans)
    assert not [t for t in GAME_TEXT if t in exported]  # content capture is off by default


def test_a_tools_mode_walkthrough_shows_the_game_servers_span_under_each_tool_call(phoenix):
    project = f"tools-{secrets.token_hex(4)}"
    result = _play(phoenix, project, "--mode", "tools", "--max-turns", "10")
    assert result["turns"] == 10

    def complete(spans: list[dict]) -> bool:
        return len(_named(spans, S.SESSION)) == 1 and len(_named(spans, "tools/call act")) >= 10

    spans = wait_for_spans(phoenix, project, complete)
    calls = _named(spans, f"{S.EXECUTE_TOOL} mcp__game__act")
    played = [c for c in calls if c["attributes"][S.TOOL_OUTCOME] == "ok"]
    outcomes = [(c["attributes"][S.TOOL_OUTCOME], c["context"]["span_id"]) for c in calls]
    assert len(played) == 10, (
        outcomes
    )  # (a call the model asked for as the run stopped is there too, "unfinished", red)
    assert all(c["status_code"] == "ERROR" for c in calls if c not in played)
    served = {s["parent_id"]: s for s in _named(spans, "tools/call act")}
    [session] = _named(spans, S.SESSION)
    for call in played:
        assert call["context"]["span_id"] in served, (outcomes, sorted(served))
        server = served[call["context"]["span_id"]]  # the game server's span, a child of the model's tool call
        assert server["context"]["trace_id"] == call["context"]["trace_id"]
        assert server["attributes"][S.MCP_METHOD] == "tools/call"  # (Phoenix shows OpenInference's kinds)
        # the session id, sent to the game server's process as W3C baggage with the call's traceparent
        assert server["attributes"][S.SESSION_ID] == session["attributes"][S.SESSION_ID]
        assert call["attributes"][S.TOOL_OUTPUT_CHARS] > 0
    turn_ids = {t["context"]["span_id"] for t in _named(spans, S.TURN)}
    assert all(c["parent_id"] in turn_ids for c in calls)
    # a model request still in flight as the run stopped is cut off: an error span, with no usage to carry
    answered = [c for c in _named(spans, S.CHAT) if c["status_code"] != "ERROR"]
    assert len(answered) >= 11  # the ones that asked for new_game and the ten acts played
    assert all(c["attributes"][S.GEN_AI_INPUT_TOKENS] > 0 for c in answered)
    assert not [t for t in GAME_TEXT if t in json.dumps(spans)]
