"""The console script, run as a user runs it: a real process, real stdout and exit codes."""

import json
import subprocess
import sys

from tests.conftest import ZORK1, ZORK1_R119
from tests.httpserver import serve


def frobozz(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "frobozz", *args], capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_games_list_shows_the_catalogue_and_what_is_installed():
    out = frobozz("games", "list").stdout
    assert "zork1" in out and "zork1-r119" in out and "MIT" in out


def test_games_verify_reports_the_header_md5_and_jericho_support():
    report = json.loads(frobozz("games", "verify", str(ZORK1), "--json").stdout)
    assert report == {
        "path": str(ZORK1),
        "version": 3,
        "release": 88,
        "serial": "840726",
        "md5": "b732a93a6244ddd92a9b9a3e3a46c687",
        "bytes": 92160,
        "jericho_supported": True,
    }
    assert json.loads(frobozz("games", "verify", str(ZORK1_R119), "--json").stdout)["jericho_supported"] is False


def test_games_verify_refuses_a_file_that_is_not_a_story(tmp_path):
    bad = tmp_path / "bad.z5"
    bad.write_bytes(b"MZ\x90\x00" * 100)
    done = frobozz("games", "verify", str(bad), check=False)
    assert done.returncode == 1 and "not a Z-machine story" in done.stderr and done.stdout == ""
    done = frobozz("games", "verify", str(tmp_path / "missing.z5"), check=False)
    assert done.returncode == 1 and "no story file" in done.stderr


def test_the_walkthrough_wins_through_the_stdio_server_and_its_map_can_be_drawn_after():
    result = json.loads(frobozz("games", "walkthrough", "zork1", "--json").stdout)
    assert (result["score"], result["max_score"], result["steps"], result["won"]) == (350, 350, 396, True)
    text = frobozz("games", "map", result["session_id"]).stdout
    assert "West of House" in text and "Stone Barrow" in text
    dot = frobozz("games", "map", result["session_id"], "--format", "dot").stdout
    assert dot.startswith("digraph map {")
    done = frobozz("games", "map", "../../etc/passwd", check=False)
    assert done.returncode == 1 and "not a game session id" in done.stderr
    assert frobozz("games", "map", "0123abcd", check=False).returncode == 1


def test_serve_refuses_an_unknown_server_name():
    done = frobozz("serve", "nothing", check=False)
    assert done.returncode == 2 and "no server 'nothing'" in done.stderr


def test_games_install_downloads_into_the_data_directory(frobozz_env):
    with serve({"/zork1.z3": (200, ZORK1_R119.read_bytes()), "/bad": (200, b"junk")}) as base:
        done = frobozz("games", "install", "zork1-r119", "--url", f"{base}/zork1.z3")
        assert "installed" in done.stdout
        assert (frobozz_env / "games" / "zork1-r119.z3").read_bytes() == ZORK1_R119.read_bytes()
        (frobozz_env / "games" / "zork1-r119.z3").unlink()
        done = frobozz("games", "install", "zork1-r119", "--url", f"{base}/bad", check=False)
    assert done.returncode == 1 and "md5" in done.stderr
    assert not (frobozz_env / "games" / "zork1-r119.z3").exists()


def test_games_install_of_a_game_already_in_the_games_directory_downloads_nothing(frobozz_env):
    """FROBOZZ_GAMES_DIR holds it (the tests' own): no network is asked, nothing is written."""
    done = frobozz("games", "install", "zork1")
    assert done.stdout.startswith(f"installed {ZORK1} already") and not (frobozz_env / "games").exists()


def test_games_list_says_a_damaged_story_is_damaged_and_how_to_replace_it(frobozz_env, monkeypatch):
    """It said installed "yes" for an empty zork1.z5, which `play` refuses."""
    monkeypatch.delenv("FROBOZZ_GAMES_DIR")
    (frobozz_env / "games").mkdir(parents=True)
    (frobozz_env / "games" / "zork1.z5").write_bytes(b"")
    out = frobozz("games", "list").stdout
    [row] = [line for line in out.splitlines() if " zork1 " in line]
    assert "damaged" in row and " yes " not in row
    assert f"zork1: zork1.z5 is not a Z-machine story file: 0 bytes is shorter than a header ({frobozz_env}" in out
    assert "fix: remove it, or run `frobozz games install zork1`" in out


def test_games_list_says_a_damaged_story_file_not_in_the_catalogue_is_damaged_and_how_to_replace_it(
    frobozz_env, monkeypatch
):
    """It was left out of the list: nothing said why the file in the games folder could not be played."""
    monkeypatch.delenv("FROBOZZ_GAMES_DIR")
    (frobozz_env / "games").mkdir(parents=True)
    (frobozz_env / "games" / "mine.z5").write_bytes(b"not a story")
    out = frobozz("games", "list").stdout
    [row] = [line for line in out.splitlines() if " mine " in line]
    assert "damaged" in row and " yes " not in row
    assert "mine: mine.z5 is not a Z-machine story file" in out and str(frobozz_env / "games" / "mine.z5") in out
    assert "fix: remove it, or put a good copy of the story file in its place" in out
    assert "games install mine" not in out


def test_games_map_of_a_file_that_is_no_journal_fails_saying_so_and_an_unknown_id_says_where_ids_come_from():
    """It drew "0 rooms, 0 passages" (exit 0) for an empty, garbage or `{}` journal and quoted an AttributeError for
    `[1,2]`; a run id got only "is not a session id"."""
    from frobozz.games import GamesSettings

    sessions = GamesSettings().sessions_dir
    sessions.mkdir(parents=True)
    for content in ("", "garbage\n", "{}\n", "[1,2]\n"):
        (sessions / "0123abcd.jsonl").write_text(content)
        done = frobozz("games", "map", "0123abcd", check=False)
        assert done.returncode == 1 and done.stdout == "", content
        assert "is not a game session journal: no line of it is a journal record" in done.stderr, content
        assert "Error(" not in done.stderr
    for unknown in ("20261130-192900-abcd", "ffff0000"):
        done = frobozz("games", "map", unknown, check=False)
        assert done.returncode == 1
        assert "games walkthrough --json" in done.stderr and "frobozz runs show RUN" in done.stderr
