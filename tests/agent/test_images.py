"""Images in messages, over real HTTP to the real claude CLI: inline (base64) or uploaded first, passed to the
model as image content; too large, not what it says it is, or not an image at all: a clear error and nothing
kept."""

from __future__ import annotations

import base64
import struct
import zlib

import anyio
import pytest

from tests.agent.test_http import Service, sse

pytestmark = pytest.mark.anyio


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG (grey pixels)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def images_in(request) -> list[dict]:
    """The image blocks of the request's last user message."""
    last = [m for m in request.body["messages"] if m["role"] == "user"][-1]
    return (
        [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "image"]
        if isinstance(last["content"], list)
        else []
    )


async def test_an_uploaded_image_and_an_inline_one_reach_the_model_as_image_content(make_agent, scripted):
    picture, other = png(), png(3, 1)
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/pictures"})).json()["session_id"]
        uploaded = await client.post(
            f"/sessions/{session}/files", content=picture, headers={"Content-Type": "image/png"}
        )
        assert uploaded.status_code == 201 and uploaded.json()["media_type"] == "image/png"
        assert uploaded.json()["size"] == len(picture)
        sent = await client.post(
            f"/sessions/{session}/messages",
            json={
                "text": "what is in these?",
                "files": [uploaded.json()["file_id"]],
                "images": [{"media_type": "image/png", "data": base64.b64encode(other).decode()}],
            },
        )
        assert sent.status_code == 202
        with anyio.fail_after(60):
            events = await sse(client, f"/sessions/{session}/events")
    assert events[-1]["event"] == "done"
    blocks = images_in(scripted.requests[-1])
    assert [base64.b64decode(b["source"]["data"]) for b in blocks] == [picture, other]
    assert all(b["source"]["media_type"] == "image/png" for b in blocks)
    assert "what is in these?" in scripted.requests[-1].last_user_text()


async def test_a_huge_image_a_fake_png_and_an_unknown_file_are_refused_and_nothing_is_kept(make_agent):
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/pictures"})).json()["session_id"]
        files = f"/sessions/{session}/files"
        huge = await client.post(
            files, content=b"\x89PNG\r\n\x1a\n" + b"\0" * (30 * 1024 * 1024), headers={"Content-Type": "image/png"}
        )
        assert huge.status_code == 413 and "the most an image may be" in huge.json()["error"]
        fake = await client.post(files, content=b"<svg>not a png at all</svg>", headers={"Content-Type": "image/png"})
        assert fake.status_code == 400 and "says it is PNG but it is no image" in fake.json()["error"]
        for content, kind, says in (
            (png(), "image/bmp", "not 'image/bmp'"),
            (b"", "image/png", "empty"),
            (png(), "image/jpeg", "says it is JPEG but it is PNG"),
        ):
            refused = await client.post(files, content=content, headers={"Content-Type": kind})
            assert refused.status_code == 400 and says in refused.json()["error"]
        messages = f"/sessions/{session}/messages"
        for body, says in (
            ({"text": "look", "files": ["0" * 32]}, "no file"),
            ({"text": "look", "files": "abc"}, "is a list"),
            ({"text": "look", "images": [{"media_type": "image/png", "data": "%%%"}]}, "not base64"),
            (
                {
                    "text": "look",
                    "images": [{"media_type": "image/png", "data": base64.b64encode(b"GIF89a....").decode()}],
                },
                "says it is PNG but it is GIF",
            ),
            ({"text": "look", "images": ["x"]}, "an image is"),
            ({"text": "", "images": []}, "needs some text"),
            (
                {
                    "text": "look",
                    "images": [{"media_type": "image/png", "data": base64.b64encode(png()).decode()}] * 11,
                },
                "at most 10",
            ),
        ):
            refused = await client.post(messages, json=body)
            assert refused.status_code == 400 and says in refused.json()["error"], (body, refused.json())
        assert (await client.get(f"/sessions/{session}/agentapi/messages")).json() == {"messages": []}
        assert (
            await client.post(f"/sessions/{'0' * 32}/files", content=png(), headers={"Content-Type": "image/png"})
        ).status_code == 404


async def test_a_message_of_images_or_files_alone_needs_no_text(make_agent, scripted):
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/pictures"})).json()["session_id"]
        inline = {"images": [{"media_type": "image/png", "data": base64.b64encode(png()).decode()}]}
        uploaded = await client.post(f"/sessions/{session}/files", content=png(), headers={"Content-Type": "image/png"})
        after = "1"  # (the status the session was made with)
        for body in (inline, {"files": [uploaded.json()["file_id"]]}):
            sent = await client.post(f"/sessions/{session}/messages", json=body)
            assert sent.status_code == 202, (body, sent.text)
            with anyio.fail_after(60):
                events = await sse(client, f"/sessions/{session}/events?after={after}")
            after = events[-1]["id"]
            assert events[-1]["event"] == "done" and events[-1]["data"]["result"].startswith("I see 1 image(s)")
            last = [m for m in scripted.requests[-1].body["messages"] if m["role"] == "user"][-1]["content"]
            assert len(images_in(scripted.requests[-1])) == 1 and all(b.get("text") != "" for b in last)
        for body in ({"images": []}, {"files": []}, {}, {"text": 5, "images": inline["images"]}):
            refused = await client.post(f"/sessions/{session}/messages", json=body)
            assert refused.status_code == 400 and "needs some text" in refused.json()["error"], body
