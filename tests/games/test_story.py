import os
from pathlib import Path

import pytest

from frobozz.games import StoryFileError, parse_story, read_story
from tests.conftest import ZORK1, ZORK1_R119


def test_zork1_releases_are_read_from_their_headers():
    r88 = read_story(ZORK1)
    assert (r88.version, r88.release, r88.serial, r88.md5) == (3, 88, "840726", "b732a93a6244ddd92a9b9a3e3a46c687")
    assert r88.length == 84876 and r88.size == 92160  # jericho's copy is padded past its declared length
    r119 = read_story(ZORK1_R119)
    assert (r119.release, r119.serial, r119.md5) == (119, "880429", "1d4606016ea58ee038da53d994392323")


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "shorter than a header"),
        (b"\x03" * 63, "shorter than a header"),
        (b"\x00" * 4096, "version byte 0"),
        (b"\xff" + bytes(4095), "version byte 255"),
    ],
)
def test_files_that_are_not_stories_are_refused(data, message):
    with pytest.raises(StoryFileError, match=message):
        parse_story(data, Path("bad.z5"))


def test_random_bytes_are_refused_before_any_interpreter():
    for _ in range(50):
        data = bytearray(os.urandom(90_000))
        data[0] = 3  # even with a plausible version byte
        with pytest.raises(StoryFileError):
            parse_story(bytes(data), Path("noise.z3"))


def test_a_truncated_story_file_is_refused():
    data = ZORK1_R119.read_bytes()
    with pytest.raises(StoryFileError, match="truncated"):
        parse_story(data[:50_000], Path("cut.z3"))


def test_a_story_with_one_flipped_byte_fails_its_checksum():
    data = bytearray(ZORK1_R119.read_bytes())
    data[40_000] ^= 0xFF
    with pytest.raises(StoryFileError, match="checksum"):
        parse_story(bytes(data), Path("flipped.z3"))


def test_missing_huge_and_directory_paths_get_clear_errors(tmp_path):
    with pytest.raises(StoryFileError, match="no story file"):
        read_story(tmp_path / "nothing.z5")
    with pytest.raises(StoryFileError, match="no story file"):
        read_story(tmp_path)
    huge = tmp_path / "huge.z5"
    huge.write_bytes(b"\x05" * (2 * 1024 * 1024))
    with pytest.raises(StoryFileError, match="larger than any"):
        read_story(huge)
