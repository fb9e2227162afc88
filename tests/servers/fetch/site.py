"""A real web site on 127.0.0.1 for the fetch tests: pages, feeds, a PDF, images, bad servers."""

from __future__ import annotations

import functools
import io
import zlib

import anyio
import anyio.lowlevel
from PIL import Image
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from frobozz._loopback import LoopbackServer

ARTICLE = "".join(
    f"<p>Paragraph {i} of the article about the Great Underground Empire and its brass lantern.</p>" for i in range(12)
)
PAGE = f"""<!doctype html><html><head><title>The Great Underground Empire</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/shop">Shop</a></nav>
<article><h1>The Great Underground Empire</h1>{ARTICLE}</article>
<footer>Copyright 1981 Infocom. Cookie settings. Subscribe to our newsletter.</footer></body></html>"""
LONG = (
    "<!doctype html><html><head><title>Long</title></head><body><article>"
    + "".join(f"<p>Section {i}. " + "The troll guards the passage. " * 20 + "</p>" for i in range(60))
    + "</article></body></html>"
)
RSS = """<?xml version="1.0"?><rss version="2.0"><channel><title>Zork News</title>
<item><title>Thief spotted</title><link>http://example.org/thief</link><pubDate>Mon, 01 Jan 2024 10:00:00 GMT</pubDate>
<description>A &lt;b&gt;seedy-looking&lt;/b&gt; gentleman was seen.</description></item>
<item><title>Grue warning</title><link>http://example.org/grue</link><description>Carry a lamp.</description></item>
</channel></rss>"""
ATOM = """<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>Dungeon Log</title>
<entry><title>Entered the cellar</title><link href="http://example.org/cellar"/><updated>2024-02-02T00:00:00Z</updated>
<summary>It was dark.</summary></entry></feed>"""


def pdf(pages: list[str]) -> bytes:
    """A small, valid PDF with one line of Helvetica text per page."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    for text in pages:
        stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
        page_no, content_no = len(objects) + 1, len(objects) + 2
        kids.append(f"{page_no} 0 R")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_no} 0 R "
            f"/Resources << /Font << /F1 {len(pages) * 2 + 3} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode()}\nendstream")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>"
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out, offsets = io.BytesIO(), []
    out.write(b"%PDF-1.4\n")
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{n} 0 obj\n{body}\nendobj\n".encode())
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write("".join(f"{o:010d} 00000 n \n" for o in offsets).encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 120, 40)).save(out, format="PNG")
    return out.getvalue()


class Site:
    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.port = 0
        self._server: LoopbackServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _count(self, request: Request) -> None:
        self.hits[request.url.path] = self.hits.get(request.url.path, 0) + 1

    async def route(self, request: Request) -> Response:
        self._count(request)
        path = request.url.path

        def html(body, **kw):
            return Response(body, media_type="text/html; charset=utf-8", **kw)

        if path == "/page.html":
            return html(PAGE)
        if path == "/long.html":
            return html(LONG)
        if path == "/md-page.html":
            return html(
                '<html><head><title>Doc</title><link rel="alternate" type="text/markdown" href="/md-page.md">'
                "</head><body><p>HTML version.</p></body></html>"
            )
        if path == "/md-page.md":
            return Response("# The Markdown version\n\nRead this one.", media_type="text/markdown")
        if path == "/latin1.html":
            body = (
                "<html><head><meta charset='iso-8859-1'><title>Caf\xe9</title></head><body><article><p>"
                + "Un caf\xe9 cr\xe8me au bord de la for\xeat, pr\xe8s de la maison blanche. " * 5
                + "</p></article></body></html>"
            )
            return Response(body.encode("iso-8859-1"), media_type="text/html")
        if path == "/cp1252.txt":
            return Response(
                "\u201cSmart quotes\u201d \u2014 and a caf\u00e9, na\u00efve \u2026 ".encode("cp1252") * 20,
                media_type="text/plain",
            )
        if path == "/feed.xml":
            return Response(RSS, media_type="application/rss+xml")
        if path == "/atom.xml":
            return Response(ATOM, media_type="application/atom+xml")
        if path == "/doc.pdf":
            return Response(
                pdf(["First page about the troll", "Second page about the thief"]), media_type="application/pdf"
            )
        if path == "/broken.pdf":
            return Response(b"%PDF-1.4 this is not really a pdf", media_type="application/pdf")
        if path == "/image.png":
            return Response(png(2400, 1200), media_type="image/png")
        if path == "/fake.png":
            return Response(b"GIF89a not really", media_type="image/png")
        if path == "/data.json":
            return JSONResponse({"game": "zork1", "score": 350, "treasures": ["egg", "lamp"]})
        if path == "/plain.txt":
            return PlainTextResponse("Just some plain text.\nSecond line.")
        if path == "/binary.bin":
            return Response(bytes(range(256)) * 10, media_type="application/octet-stream")
        if path == "/redirect":
            return RedirectResponse("/page.html", status_code=302)
        if path == "/loop":
            return RedirectResponse("/loop", status_code=302)
        if path == "/to-metadata":
            return RedirectResponse("http://169.254.169.254/latest/meta-data/", status_code=302)
        if path == "/to-other-loopback":
            return RedirectResponse(f"http://localhost:{self.port}/page.html", status_code=302)
        if path == "/to-javascript":
            return Response(status_code=302, headers={"Location": "javascript:alert(1)"})
        if path == "/hostile.html":  # unclosed tags that send backtracking regexes (and html.parser) quadratic
            return html("<html><head>" + '<link rel="alternate" ' * 1200 + "<title>" * 25000)
        if path == "/md-bad-link.html":
            return html(
                '<html><head><title>Doc</title><link rel="alternate" type="text/markdown" href="http://[::1">'
                f"</head><body><article>{ARTICLE}</article></body></html>"
            )
        if path == "/deep.html":
            return html(
                "<html><body>"
                + "<div>" * 1000
                + "The lamp is at the bottom."
                + "</div>" * 1000
                + "<p>And the sword after it.</p></body></html>"
            )
        if path == "/deep.json":
            return Response(b"[" * 200_000 + b"]" * 200_000, media_type="application/json")
        if path == "/missing":
            return PlainTextResponse("nothing here", status_code=404)
        if path == "/broken":
            return PlainTextResponse("oops", status_code=500)
        if path == "/slow":

            async def drip():
                for _ in range(10_000):
                    yield b"x"
                    await anyio.sleep(0.3)

            return StreamingResponse(drip(), media_type="text/plain")
        if path == "/endless":

            async def flood():
                chunk = b"All work and no play makes a dull adventurer. " * 1000
                while True:
                    yield chunk
                    await anyio.lowlevel.checkpoint()

            return StreamingResponse(flood(), media_type="text/plain")
        if path == "/bomb":
            return Response(bomb(), media_type="text/plain", headers={"Content-Encoding": "gzip"})
        if path == "/robots.txt":
            return PlainTextResponse("User-agent: *\nDisallow: /private/\n")
        if path == "/private/secret.html":
            return html("<html><body>secret</body></html>")
        if path == "/etag.html":
            if request.headers.get("if-none-match") == '"v1"':
                return Response(status_code=304, headers={"ETag": '"v1"'})
            return html(PAGE, headers={"ETag": '"v1"'})
        if path == "/yt/watch":
            return html(
                "<html><head><title>The Making of Zork - YouTube</title></head><body><script>"
                'var ytcfg = {"INNERTUBE_API_KEY": "testkey"};</script></body></html>'
            )
        if path == "/yt/youtubei/v1/player":
            body = await request.json()
            if body.get("videoId") == "nocaptions0":
                return JSONResponse({"playabilityStatus": {"status": "OK"}, "captions": {}})
            track = {
                "baseUrl": f"{self.url}/yt/timedtext?v={body.get('videoId')}",
                "languageCode": "en",
                "name": {"runs": [{"text": "English"}]},
                "isTranslatable": False,
            }
            return JSONResponse(
                {
                    "playabilityStatus": {"status": "OK"},
                    "captions": {"playerCaptionsTracklistRenderer": {"captionTracks": [track]}},
                }
            )
        if path == "/yt/timedtext":
            return Response(
                '<?xml version="1.0" encoding="utf-8" ?><transcript>'
                '<text start="0.5" dur="2.0">Welcome to the Great Underground Empire.</text>'
                '<text start="65.2" dur="3.1">Beware of the grue &amp; the thief.</text>'
                "</transcript>",
                media_type="text/xml",
            )
        if path == "/raw/zork/zork1/HEAD/README.md":
            return PlainTextResponse("# zork1\n\nThe Great Underground Empire, in ZIL.")
        if path == "/raw/zork/zork1/main/src/1dungeon.zil":
            return PlainTextResponse('<ROOM WEST-OF-HOUSE (DESC "West of House")>')
        return PlainTextResponse("not found", status_code=404)

    def __enter__(self) -> Site:
        self._server = LoopbackServer(Starlette(routes=[Route("/{path:path}", self.route, methods=["GET", "POST"])]))
        self._server.start()
        self.port = self._server.port
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()


@functools.cache
def bomb() -> bytes:
    """200 MB of zeros, gzipped to about 200 kB (made a megabyte at a time)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    megabyte = b"\0" * (1024 * 1024)
    return b"".join(packer.compress(megabyte) for _ in range(200)) + packer.flush()
