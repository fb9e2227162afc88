"""The image checks and thumbnails on their own (no database): what a photo looks like after, and what is
refused before anything is decoded."""

import base64
import io

import pytest
from PIL import Image

from frobozz.memory import THUMBNAIL_EDGE, ImageError, ImageInput
from frobozz.memory._images import check, read


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    data = io.BytesIO()
    image.save(data, fmt, **options)
    return data.getvalue()


def test_a_photo_turned_by_its_exif_orientation_is_thumbnailed_upright():
    photo = Image.new("RGB", (2400, 1200), "blue")
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to view"
    picture = check(encoded(photo, "JPEG", exif=exif), "image/jpeg", max_pixels=40_000_000)
    assert (picture.width, picture.height) == (2400, 1200)  # the original as stored
    assert (picture.thumbnail_width, picture.thumbnail_height) == (384, 768)
    assert Image.open(io.BytesIO(picture.thumbnail)).size == (384, 768)


def test_transparency_lands_on_white_and_a_small_image_is_not_enlarged():
    clear = Image.new("RGBA", (300, 200), (0, 0, 0, 0))
    picture = check(encoded(clear, "PNG"), "image/png", max_pixels=40_000_000)
    thumbnail = Image.open(io.BytesIO(picture.thumbnail))
    assert thumbnail.size == (300, 200) and thumbnail.mode == "RGB" and thumbnail.getpixel((10, 10)) == (255, 255, 255)


def test_an_animated_gif_keeps_its_first_frame_as_thumbnail():
    frames = [Image.new("P", (1000, 1000), i) for i in (10, 200)]
    raw = encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    picture = check(raw, "image/gif", max_pixels=40_000_000)
    assert picture.raw == raw and max(Image.open(io.BytesIO(picture.thumbnail)).size) == THUMBNAIL_EDGE


def test_the_pixel_limit_refuses_before_decoding():
    raw = encoded(Image.new("L", (3000, 2000)), "PNG")
    with pytest.raises(ImageError, match="3000x2000 = 6,000,000 pixels; at most 5,000,000"):
        check(raw, "image/png", max_pixels=5_000_000)


def test_base64_over_the_limit_is_refused_before_it_is_decoded():
    with pytest.raises(ImageError, match=r"over the limit of 0\.0 MB"):
        read(ImageInput(data=base64.b64encode(b"x" * 1000).decode(), media_type="image/png"), folders=[], max_bytes=100)
    assert read(ImageInput(data="aGVs\nbG8=", media_type="image/png"), folders=[], max_bytes=100) == (
        b"hello",
        "image/png",
    )
