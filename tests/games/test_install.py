import pytest

from frobozz.games import CATALOGUE, InstallError, install, read_story
from tests.conftest import ZORK1, ZORK1_R119
from tests.httpserver import serve

pytestmark = pytest.mark.anyio


def _zork1_as_published() -> bytes:
    """The story as the source repository has it: jericho's copy without its padding."""
    return ZORK1.read_bytes()[:84876]


async def test_install_downloads_pads_and_verifies_zork1(tmp_path):
    with serve({"/zork1.zip": (200, _zork1_as_published())}) as base:
        story = await install("zork1", tmp_path, url=f"{base}/zork1.zip")
    assert story.path == tmp_path / "zork1.z5"
    assert read_story(story.path).md5 == CATALOGUE["zork1"].md5
    assert story.path.read_bytes() == ZORK1.read_bytes()


async def test_install_of_an_unpadded_release_keeps_it_as_it_is(tmp_path):
    with serve({"/zork1.z3": (200, ZORK1_R119.read_bytes())}) as base:
        story = await install("zork1-r119", tmp_path, url=f"{base}/zork1.z3")
    assert story.md5 == CATALOGUE["zork1-r119"].md5


async def test_an_empty_or_other_download_is_refused_naming_both_files_the_catalogue_takes(tmp_path):
    """The message named only the unpadded original's md5, which no command shows."""
    with serve({"/empty": (200, b""), "/other": (200, ZORK1_R119.read_bytes())}) as base:
        for path in ("/empty", "/other"):
            with pytest.raises(InstallError) as refused:
                await install("zork1", tmp_path, url=f"{base}{path}")
            message = str(refused.value)
            assert f"the story file (md5 {CATALOGUE['zork1'].md5})" in message
            assert f"the original it is padded from (md5 {CATALOGUE['zork1'].source_md5})" in message
    assert list(tmp_path.iterdir()) == []


async def test_install_takes_the_finished_story_file_as_verify_and_list_give_it(tmp_path):
    """`--url` of jericho's padded copy (md5 b732..., as the games README and `games verify` say) was refused."""
    with serve({"/zork1.z5": (200, ZORK1.read_bytes())}) as base:
        story = await install("zork1", tmp_path, url=f"{base}/zork1.z5")
    assert story.md5 == CATALOGUE["zork1"].md5 and story.path.read_bytes() == ZORK1.read_bytes()


async def test_install_is_a_no_op_when_the_game_is_already_there(tmp_path):
    (tmp_path / "zork1.z5").write_bytes(ZORK1.read_bytes())
    story = await install("zork1", tmp_path, url="http://127.0.0.1:9/unreachable")
    assert story.md5 == CATALOGUE["zork1"].md5


@pytest.mark.parametrize(
    "status, body, message",
    [
        (200, b"<html>not a story</html>", "md5"),
        (404, b"", "HTTP 404"),
        (500, b"oops", "HTTP 500"),
        (200, b"\x03" * (600 * 1024), "larger than any story"),
    ],
)
async def test_a_bad_download_installs_nothing(tmp_path, status, body, message):
    with serve({"/f": (status, body)}) as base:
        with pytest.raises(InstallError, match=message):
            await install("zork1", tmp_path, url=f"{base}/f")
    assert list(tmp_path.iterdir()) == []


async def test_an_unreachable_server_and_an_unknown_game_get_clear_errors(tmp_path):
    with pytest.raises(InstallError, match=r"download of .* failed"):
        await install("zork1", tmp_path, url="http://127.0.0.1:9/zork1.zip")
    with pytest.raises(InstallError, match="no game 'zork9' in the catalogue"):
        await install("zork9", tmp_path)


def test_an_installed_copy_is_the_very_story_in_the_first_folder_that_has_it_and_a_damaged_one_is_passed_over(
    tmp_path,
):
    from frobozz.games import installed_copy

    damaged, good, empty = (tmp_path / n for n in ("damaged", "good", "empty"))
    for folder in (damaged, good, empty):
        folder.mkdir()
    (damaged / ZORK1.name).write_bytes(ZORK1.read_bytes()[:1000])
    (good / ZORK1.name).write_bytes(ZORK1.read_bytes())
    assert installed_copy("zork1", []) is None and installed_copy("zork1", [empty, damaged]) is None
    assert installed_copy("zork1", [empty, damaged, good]).path == good / ZORK1.name


async def test_a_download_url_that_is_no_url_is_an_install_error_not_a_traceback(tmp_path):
    with pytest.raises(InstallError, match="Invalid port"):
        await install("zork1", tmp_path, url="http://[::1")
    assert list(tmp_path.iterdir()) == []
