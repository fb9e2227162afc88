"""fetch benchmark: pages/s converting real-size pages, and peak memory fetching a 50 MB body with a
5 MB cap, for `frobozz serve fetch` and the reference `mcp-server-fetch`, both over stdio, one run.

Run: .venv/bin/python bench/fetch.py  (installs mcp-server-fetch into a venv of its own on first run;
if it cannot be installed, only Frobozz's figures are printed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

PAGES = 30
REF_VENV = Path(tempfile.gettempdir()) / "frobozz-bench-mcp-server-fetch"


def page(n: int) -> bytes:
    """About 120 kB of HTML shaped like a real article page: navigation, article, table, footer."""
    nav = "".join(f'<li><a href="/section/{i}">Section {i}</a></li>' for i in range(80))
    paragraphs = "".join(
        f"<p>Paragraph {i} of article {n}: the adventurer enters the maze of twisty little "
        f"passages, all alike, carrying a brass lantern and an elvish sword. " * 3 + "</p>"
        for i in range(120)
    )
    table = (
        "<table>" + "".join(f"<tr><td>Treasure {i}</td><td>{i * 5} points</td></tr>" for i in range(40)) + "</table>"
    )
    footer = "".join(f'<a href="/legal/{i}">Legal {i}</a> ' for i in range(60))
    return (
        f"<!doctype html><html><head><title>Article {n}</title><script>var x = {'1' * 2000};</script></head>"
        f"<body><nav><ul>{nav}</ul></nav><main><article><h1>Article {n}</h1>{paragraphs}{table}</article></main>"
        f"<footer>{footer}</footer></body></html>"
    ).encode()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/big"):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(50 * 1024 * 1024))
            self.end_headers()
            chunk = b"x" * (1024 * 1024)
            try:
                for _ in range(50):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        body = page(int(self.path.strip("/").split(".")[0] or 0)) if self.path != "/robots.txt" else b""
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8" if self.path != "/robots.txt" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def reference_python() -> str | None:
    python = REF_VENV / "bin" / "python"
    if not python.exists():
        print("installing mcp-server-fetch for comparison …", file=sys.stderr)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(REF_VENV)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "mcp-server-fetch"],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except (subprocess.CalledProcessError, OSError):
            return None
    return str(python)


def rss_mb(marker: str, field: str = "VmHWM:") -> float | None:
    """The high-water (or, with field="VmRSS:", current) RSS of the process whose command line has `marker`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if marker in cmdline and "bench/fetch.py" not in cmdline:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith(field):
                        return int(line.split()[1]) / 1024
        except OSError:
            continue
    return None


async def measure(params: StdioServerParameters, base: str, marker: str, extra: dict) -> tuple[float, float, int]:
    async with Client(params, read_timeout_seconds=120) as client:
        await client.call_tool("fetch", {"url": f"{base}/0.html", **extra})  # warm up
        t0 = time.perf_counter()
        chars = 0
        for n in range(PAGES):
            result = await client.call_tool("fetch", {"url": f"{base}/{n}.html", "max_length": 999_999, **extra})
            if result.is_error:
                raise SystemExit(f"{marker}: fetch failed: {result.content[0].text}")
            chars += sum(len(getattr(b, "text", "")) for b in result.content)
        rate = PAGES / (time.perf_counter() - t0)
        before = rss_mb(marker) or 0.0
        big = await client.call_tool("fetch", {"url": f"{base}/big", "max_length": 1000, **extra})
        if big.is_error:
            raise SystemExit(f"{marker}: the 50 MB fetch failed: {big.content[0].text}")
        return rate, (rss_mb(marker) or 0.0) - before, chars // PAGES


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    env = {
        "FROBOZZ_FETCH_ALLOW_PRIVATE": "1",
        "FROBOZZ_FETCH_CACHE": "0",
        "FROBOZZ_FETCH_MAX_BYTES": str(5 * 2**20),
        "FROBOZZ_DATA_DIR": tempfile.mkdtemp(),
    }
    ours = StdioServerParameters(command=sys.executable, args=["-m", "frobozz", "serve", "fetch"], env=env)
    rate, peak, size = anyio.run(measure, ours, base, "frobozz serve fetch", {})
    print(f"{PAGES} article pages of {len(page(0)) // 1024} kB each, served from 127.0.0.1, fetched over stdio")
    print(
        f"  frobozz fetch          {rate:7.1f} pages/s   {size:7d} chars/page   peak memory grew by {peak:5.1f} MB "
        "fetching a 50 MB body with a 5 MB cap"
    )
    python = reference_python()
    if python is None:
        print("  mcp-server-fetch       (could not be installed here)")
        return
    reference = StdioServerParameters(
        command=python, args=["-m", "mcp_server_fetch", "--ignore-robots-txt", "--allow-private-ips"]
    )
    ref_rate, ref_peak, ref_size = anyio.run(measure, reference, base, "mcp_server_fetch", {})
    print(
        f"  mcp-server-fetch       {ref_rate:7.1f} pages/s   {ref_size:7d} chars/page   peak memory grew by "
        f"{ref_peak:5.1f} MB fetching the same body"
    )
    print(
        f"  ratio (frobozz / reference): {rate / ref_rate:.1f}x pages/s; peak memory growth "
        f"{peak:.1f} MB vs {ref_peak:.1f} MB"
    )


if __name__ == "__main__":
    main()
