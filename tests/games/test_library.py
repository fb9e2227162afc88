import pytest

from frobozz.games import GameLibrary, GameNotFoundError, GamesSettings, StoryFileError
from tests.conftest import GAMES_DIR, ZORK1


@pytest.mark.parametrize(
    "name, file_name",
    [
        ("zork1", "zork1.z5"),
        ("ZORK1", "zork1.z5"),
        ("zork1.z5", "zork1.z5"),
        ("zork1-r119", "zork1-r119.z3"),
        ("zork1-r119.z3", "zork1-r119.z3"),
        (" zork1 ", "zork1.z5"),
    ],
)
def test_games_are_found_by_catalogue_name_or_file_name(settings, name, file_name):
    assert GameLibrary(settings).find(name).path == GAMES_DIR / file_name


@pytest.mark.parametrize(
    "name",
    [
        "../games/zork1.z5",
        "/etc/passwd",
        str(ZORK1),
        "..",
        ".hidden",
        "a\\b",
        "nul\0",
        "tab\tname",
        "x" * 300,
    ],
)
def test_paths_and_hostile_names_are_refused_as_game_names(settings, name):
    with pytest.raises(GameNotFoundError, match="not a game name"):
        GameLibrary(settings).find(name)


def test_an_unknown_game_names_where_it_looked_and_how_to_install(settings):
    with pytest.raises(GameNotFoundError, match=r"no game 'nope'.*looked in"):
        GameLibrary(settings).find("nope")
    with pytest.raises(GameNotFoundError, match="no game named"):
        GameLibrary(settings).find("")


def test_a_catalogued_game_not_installed_says_how_to_install_it(tmp_path):
    library = GameLibrary(GamesSettings(games_dir=tmp_path / "empty", data_dir=tmp_path / "data"))
    with pytest.raises(GameNotFoundError, match="frobozz games install zork1"):
        library.find("zork1")


def test_an_explicit_path_is_allowed_only_where_the_caller_says_so(settings):
    assert GameLibrary(settings).find(str(ZORK1), allow_path=True).md5 == "b732a93a6244ddd92a9b9a3e3a46c687"


def test_a_symlink_out_of_the_games_directory_is_refused(tmp_path):
    games = tmp_path / "games"
    games.mkdir()
    (games / "sneaky.z5").symlink_to(ZORK1)
    library = GameLibrary(GamesSettings(games_dir=games, data_dir=tmp_path / "data"))
    with pytest.raises(StoryFileError, match="outside the games directory"):
        library.find("sneaky")


def test_a_damaged_copy_is_passed_over_for_a_good_one_and_named_with_its_folder_when_none_is_good(tmp_path, caplog):
    """FROBOZZ_GAMES_DIR comes first: a damaged copy there stopped every game of that name, though a good one
    was installed in the data directory, and its error named the file but not where it was."""
    games, data = tmp_path / "games", tmp_path / "data"
    games.mkdir()
    (games / "zork1.z3").write_bytes(b"\x37" + b"\0" * 100)  # found first, as a name + suffix: not a story
    library = GameLibrary(GamesSettings(games_dir=games, data_dir=data))
    with pytest.raises(StoryFileError, match=rf"zork1.z3 is not a Z-machine story file: .* \(in {games}\)"):
        library.find("zork1")
    library.settings.installed_games_dir.mkdir(parents=True)
    (library.settings.installed_games_dir / "zork1.z5").write_bytes(ZORK1.read_bytes())
    assert library.find("zork1").md5 == "b732a93a6244ddd92a9b9a3e3a46c687"
    assert "a copy passed over: zork1.z3 is not a Z-machine story file" in caplog.text


def test_the_listing_and_the_stories_give_a_good_copy_where_an_earlier_folder_holds_a_damaged_one(tmp_path):
    """As `find` does: a worker that takes the games its stories() name took no zork1 runs, and `games list`
    showed the damaged copy, though a good one was installed."""
    games, data = tmp_path / "games", tmp_path / "data"
    games.mkdir()
    (games / "zork1.z5").write_bytes(b"\x37" + b"\0" * 100)
    library = GameLibrary(GamesSettings(games_dir=games, data_dir=data))
    library.settings.installed_games_dir.mkdir(parents=True)
    good = library.settings.installed_games_dir / "zork1.z5"
    good.write_bytes(ZORK1.read_bytes())
    assert {g.name: g.path for g in library.listing()}["zork1"] == str(good)
    assert [s.path for s in library.stories()] == [good]


def _checksum_broken() -> bytes:
    """Zork I with a few bytes of its contents overwritten: a whole header, but its checksum no longer adds up."""
    data = bytearray(ZORK1.read_bytes())
    data[0x4000:0x4004] = b"\xff\xff\xff\xff"
    return bytes(data)


def test_the_listing_shows_the_catalogue_and_other_story_files(tmp_path):
    games = tmp_path / "games"
    games.mkdir()
    (games / "mygame.z3").write_bytes((GAMES_DIR / "zork1-r119.z3").read_bytes())
    (games / "broken.z5").write_bytes(b"not a story")
    listing = GameLibrary(GamesSettings(games_dir=games, data_dir=tmp_path / "data")).listing()
    by_name = {g.name: g for g in listing}
    assert set(by_name) == {"zork1", "zork1-r119", "mygame", "broken"}
    assert not by_name["zork1"].installed and by_name["mygame"].installed
    assert by_name["mygame"].max_score == 350  # recognised by its md5
    assert not by_name["broken"].installed and by_name["broken"].damaged  # (see the test below)


@pytest.mark.parametrize("content", [b"", b"not a story", _checksum_broken()], ids=["empty", "garbage", "checksum"])
def test_a_story_file_not_in_the_catalogue_that_cannot_be_played_is_listed_as_damaged_with_why_and_its_fix(
    tmp_path, content
):
    """It was left out of the listing without a word (a damaged catalogued one was listed as damaged), so
    `games list` and the doctor never said why the file was not playable."""
    games = tmp_path / "games"
    games.mkdir()
    (games / "mine.z5").write_bytes(content)
    (games / "notes.txt").write_bytes(b"not a story file's name: not listed")
    settings = GamesSettings(games_dir=games, data_dir=tmp_path / "data")
    by_name = {g.name: g for g in GameLibrary(settings).listing()}
    mine = by_name["mine"]
    assert (mine.file_name, mine.path, mine.installed, mine.catalogued) == (
        "mine.z5",
        str(games / "mine.z5"),
        False,
        False,
    )
    assert mine.damaged and any(why in mine.damaged for why in ("shorter than a header", "checksum", "not a Z-machine"))
    assert "games install" not in mine.fix and "remove it" in mine.fix  # (the catalogue has no such game)
    assert "notes" not in by_name and GameLibrary(settings).stories() == []
    assert by_name["zork1"].fix is None and by_name["zork1"].catalogued


@pytest.mark.parametrize("content", [b"", _checksum_broken()], ids=["empty", "checksum broken"])
def test_a_damaged_catalogued_story_is_listed_as_damaged_with_why_not_as_installed(tmp_path, content):
    """`games list` said installed "yes" and the doctor blamed jericho, though `play` refused the file."""
    settings = GamesSettings(games_dir=None, data_dir=tmp_path / "data")
    settings.installed_games_dir.mkdir(parents=True)
    (settings.installed_games_dir / "zork1.z5").write_bytes(content)
    by_name = {g.name: g for g in GameLibrary(settings).listing()}
    zork = by_name["zork1"]
    assert not zork.installed and zork.path == str(settings.installed_games_dir / "zork1.z5")
    assert zork.damaged and ("shorter than a header" in zork.damaged or "checksum" in zork.damaged)
    assert GameLibrary(settings).stories() == []
    assert by_name["zork1-r119"].damaged is None
