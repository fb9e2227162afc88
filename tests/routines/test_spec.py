"""A routine's settings checked at the door: what no worker could use, or would use wrongly, is one clear error."""

import json

import pytest

from frobozz.routines import RoutineInputError, RoutineNotFoundError, routine


def refused(error, **values):
    with pytest.raises(RoutineInputError, match=error):
        routine(**{"name": "r", "prompt": "Do it.", **values})


@pytest.mark.parametrize(
    "values",
    [
        dict(kind="every", every=60, prompt="hi\x00there"),
        dict(kind="every", every=60, workspace="/tmp/\x00"),
        dict(kind="cron", cron="@daily", tz="\udcff"),
        dict(kind="cron", cron="0 9 * * *\udcff"),
    ],
)
def test_text_postgres_cannot_hold_a_nul_or_bytes_not_utf8_is_refused(values):
    refused("NUL byte or bytes that are not UTF-8", **values)


@pytest.mark.parametrize(
    "url, error",
    [
        ("http://", "names no host"),
        ("http:///x", "names no host"),
        ("http://127.0.0.1:0/a", "port 0"),
        ("http://127.0.0.1:99999/a", "Port out of range"),
        ("http://127.0.0.1/a b", "spaces or control characters"),
        ("http://127.0.0.1/a\nb", "spaces or control characters"),
        ("http://user:pw@127.0.0.1/a", "no user or password"),
        ("http://user@127.0.0.1/a", "no user or password"),
    ],
)
def test_a_feed_url_that_can_never_be_fetched_or_holds_credentials_is_refused(url, error):
    with pytest.raises(RoutineInputError, match=error) as refusal:
        routine(name="r", kind="feed", url=url, prompt="Read.")
    assert "\n" not in str(refusal.value) and "pw" not in str(refusal.value)


@pytest.mark.parametrize("name", ["a b", "x" * 65, "-rf", "_x", "[bold]x[/bold]", "x\x1b[2J", "x\n"])
def test_a_bad_name_is_refused_saying_the_rule_in_words_and_the_name_as_text_not_as_codes(name):
    with pytest.raises(RoutineInputError) as refusal:
        routine(name=name, kind="every", every=60, prompt="Do it.")
    said = str(refusal.value)
    assert "pattern" not in said and "letters, digits, '_', '.' and '-', starting with a letter or a digit" in said
    assert "at most 64 characters" in said and repr(name) in said and "\x1b" not in said and "\n" not in said


def test_a_mailbox_password_given_both_in_a_variable_and_in_a_file_is_refused_as_one_of_them():
    refused(
        "--password-env NAME or --password-file FILE \\(one of them\\)",
        kind="inbox",
        url="imaps://me@mail.example.org/INBOX",
        password_env="MY_PASSWORD",
        password_file="/run/secrets/imap",
    )
    assert routine(name="r", kind="inbox", url="imaps://me@mail.example.org/INBOX", prompt="x").password_env


def test_a_feed_url_whose_scheme_is_in_capitals_is_taken_with_it_in_lower_case():
    assert routine(name="r", kind="feed", url="HTTP://127.0.0.1/A", prompt="Read.").url == "http://127.0.0.1/A"
    assert routine(name="r", kind="feed", url="Https://example.org/feed", prompt="Read.").url.startswith("https://")


@pytest.mark.parametrize(
    "url, error",
    [
        ("imaps://u@host/IN\nBOX", "control characters"),
        ("imaps://u@host/IN%0ABOX", "folder"),
        ("imaps://u@host/IN%C2%85BOX", "folder"),
        ("imaps://caf%C3%A9@host/INBOX", "user"),
        ("imaps://u%0D@host/INBOX", "user"),
        ("imaps://u@host:0/INBOX", "port 0"),
        ("imaps://mail.example.org/INBOX", "names no user"),
    ],
)
def test_an_inbox_url_that_would_put_more_than_a_user_and_a_folder_into_imap_or_cannot_log_in_is_refused(url, error):
    with pytest.raises(RoutineInputError, match=error) as refusal:
        routine(name="r", kind="inbox", url=url, prompt="Triage.")
    assert "\n" not in str(refusal.value)


def test_an_inbox_with_a_user_and_a_folder_of_its_hierarchy_is_taken():
    spec = routine(name="r", kind="inbox", url="imaps://robin%40example.org@mail.example.org/Archive/2024", prompt="x")
    assert spec.url == "imaps://robin%40example.org@mail.example.org/Archive/2024"
    for folder in ("Sent%20Items", "[Gmail]/All%20Mail", "%22Quoted%22%20%5CFolder", "R%26D", "Bo%C3%AEte"):
        assert routine(name="r", kind="inbox", url=f"imaps://robin@mail.example.org/{folder}", prompt="x")


@pytest.mark.parametrize("model", ["", "evil\x1b[31m", "--dangerously-skip-permissions", "-x", "a b", "x" * 201])
def test_a_model_name_that_is_empty_has_control_characters_or_spaces_or_starts_with_a_dash_is_refused(model):
    refused("--model|at most 200", kind="every", every=60, model=model)


def test_claudes_model_names_and_aliases_are_taken():
    for model in (
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
        "sonnet",
        "opus[1m]",
        "claude-sonnet-4@20250514",
        "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4",
    ):
        assert routine(name="r", kind="every", every=60, prompt="x", model=model).model == model


@pytest.mark.parametrize(
    "values, option",
    [
        (dict(kind="every", every=60, password_env="FOO"), "--password-env"),
        (dict(kind="cron", cron="@daily", password_file="/etc/shadow"), "--password-file"),
        (dict(kind="feed", url="https://example.org/feed", password_env="FOO"), "--password-env"),
        (dict(kind="every", every=60, poll=5), "--poll"),
        (dict(kind="cron", cron="@daily", poll=5), "--poll"),
        (dict(kind="every", every=60, tz="Europe/Lisbon"), "--tz"),
        (dict(kind="inbox", url="imaps://me@mail.example.org/INBOX", tz="Europe/Lisbon"), "--tz"),
    ],
)
def test_an_option_that_does_not_apply_to_the_routines_trigger_is_refused(values, option):
    refused(f"{option} is for --", **values)


@pytest.mark.parametrize("tz", ["localtime", "posixrules", "Nowhere/Land", "../../etc/passwd"])
def test_a_time_zone_that_is_not_an_iana_zone_is_refused_and_utc_is_taken(tz):
    refused("unknown time zone", kind="cron", cron="@daily", tz=tz)
    assert routine(name="r", kind="cron", cron="@daily", tz="UTC", prompt="x").tz == "UTC"


@pytest.mark.parametrize(
    "cron, error",
    [
        ("R R * * *", "has R"),
        ("0 r * * *", "has R"),
        ("R/5 * * * *", "has R"),
        pytest.param("1," * 20_000 + "1 * * * *", "the limit is 200", id="40 KB"),
    ],
)
def test_a_random_or_overlong_cron_expression_is_refused(cron, error):
    refused(error, kind="cron", cron=cron)
    assert routine(name="r", kind="cron", cron="0 9 * MAR FRI", prompt="x").cron == "0 9 * MAR FRI"


@pytest.mark.parametrize("number", ["max_cost", "max_seconds", "poll"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_and_infinity_are_refused_as_not_finite_numbers_for_every_number(number, value):
    refused("finite number", kind="feed", url="https://example.org/feed", **{number: value})


def test_an_empty_workspace_or_one_that_is_a_file_is_refused_and_a_folder_yet_to_be_made_is_taken(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    for workspace in ("", "  ", str(tmp_path / "file"), str(tmp_path / "file" / "below")):
        refused("--workspace", kind="every", every=60, workspace=workspace)
    refused("cannot be looked at", kind="every", every=60, workspace=str(tmp_path / ("x" * 300)))  # (an OSError)
    spec = routine(name="r", kind="every", every=60, prompt="x", workspace=str(tmp_path / "new" / "ws"))
    assert spec.workspace == str(tmp_path / "new" / "ws")


@pytest.mark.anyio
async def test_a_routine_stored_before_these_checks_is_still_read_as_it_was(store):
    fine = routine(name="old", kind="feed", url="https://example.org/feed", prompt="Read.").model_dump()
    old = {**fine, "url": "http://u:pw@127.0.0.1/a", "model": "--x", "tz": "localtime", "password_env": "FOO"}
    await store.pool.execute("INSERT INTO routines (name, spec) VALUES ($1, $2)", "old", json.dumps(old))
    (row,) = await store.routines()
    assert (row["spec"].url, row["spec"].model, row["spec"].tz) == ("http://u:pw@127.0.0.1/a", "--x", "localtime")


@pytest.mark.anyio
async def test_a_name_that_is_not_utf8_is_no_routine_to_get_pause_or_remove(store):
    for name in ("\udcff", "a\x00b"):
        with pytest.raises(RoutineNotFoundError, match="no routine"):
            await store.get(name)
        for change in (store.set_paused(name, True), store.remove(name)):
            with pytest.raises(RoutineNotFoundError, match="no routine"):
                await change


@pytest.mark.parametrize(
    "url, suggested",
    [
        ("imap://u@mail.example.org/INBOX", "imaps://u@mail.example.org/INBOX"),
        (
            "imap://robin%40example.org@mail.example.org:143/Sent%20Items",
            "imaps://robin%40example.org@mail.example.org/Sent%20Items",
        ),
        ("imap://u@mail.example.org:1143/Archive/2024", "imaps://u@mail.example.org:1143/Archive/2024"),
    ],
)
def test_a_plain_imap_inbox_is_refused_suggesting_the_same_url_with_imaps_its_user_and_folder_kept(url, suggested):
    """It suggested `imaps://mail.example.org`, the user and folder dropped, and that URL is refused as naming no
    user. (IMAP's plain port, 143, is left out of the suggestion: imaps is on 993.)"""
    with pytest.raises(RoutineInputError, match="in the clear") as refusal:
        routine(name="r", kind="inbox", url=url, prompt="Triage.")
    assert str(refusal.value).endswith(f"use {suggested}"), refusal.value
    assert routine(name="r", kind="inbox", url=suggested, prompt="Triage.").url == suggested  # taken as suggested


@pytest.mark.parametrize(
    "values, described",
    [
        ({"kind": "every", "every": 60}, "every 60 s"),
        ({"kind": "every", "every": 1.5}, "every 1.5 s"),
        ({"kind": "every", "every": 31622400}, "every 31622400 s (366 d)"),
        ({"kind": "every", "every": 5400}, "every 5400 s (1 h 30 min)"),
        ({"kind": "feed", "url": "https://e.org/f", "poll": 7200}, "feed https://e.org/f (poll 7200 s, 2 h)"),
        ({"kind": "feed", "url": "https://e.org/f", "poll": 300}, "feed https://e.org/f (poll 300 s)"),
    ],
)
def test_an_interval_is_described_in_whole_seconds_as_given_and_an_hour_or_more_also_in_days_hours_minutes(
    values, described
):
    """`--every 31622400` was described as `every 3.16224e+07 s` (in `routine add` and `routine list`)."""
    assert routine(name="r", prompt="x", **values).describe() == described
