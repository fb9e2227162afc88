"""bench/routines.py with a timestamp at each step from a mail's APPEND to its turn's first model request
(dovecot's IDLE word, the look's poll, the queue, the firing, the session, orientation, recall, claude): where
the time goes, per mail, and the medians of each step's gap. It wraps the parts' functions from outside
(nothing in them changes). Run: .venv/bin/python bench/routines_phases.py --mails 4 --ticks 1 --every 20
"""

import atexit
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import aioimaplib
import routines as bench_mod

from frobozz.engine.producers import _inbox
from frobozz.engine.scripted import _messages_api as api
from frobozz.loop import _session
from frobozz.memory import _recall
from frobozz.routines import _worker
from tests import imapserver

EV = []


def ev(name):
    EV.append((time.time(), name))


orig_append = imapserver.ImapServer.append


def append(self, *a):
    ev("append")
    r = orig_append(self, *a)
    ev("append done")
    return r


imapserver.ImapServer.append = append

orig_init = api.ScriptedModel.__init__


def init(self, handler, **kw):
    def h(req):
        texts = [b.get("text", "") for b in req.last_user_blocks() if b.get("type") == "text"]
        t = texts[-1] if texts else ""
        ev("REQUEST " + ("side " if t.startswith(bench_mod.SIDE) else "") + t[:30].replace("\n", " "))
        return handler(req)

    orig_init(self, h, **kw)


api.ScriptedModel.__init__ = init


def wrap_async(owner, attr, name, cond=None):
    f = getattr(owner, attr)

    @functools.wraps(f)
    async def w(*a, **k):
        on = cond is None or cond(*a, **k)
        if on:
            ev(name + " start")
        try:
            return await f(*a, **k)
        finally:
            if on:
                ev(name + " end")

    setattr(owner, attr, w)


orig_push = aioimaplib.IMAP4.wait_server_push


async def push(self, *a, **k):
    r = await orig_push(self, *a, **k)
    if any(b"EXISTS" in bytes(p) for p in (r if isinstance(r, list) else [r]) if isinstance(p, (bytes, bytearray))):
        ev("IDLE EXISTS")
    return r


aioimaplib.IMAP4.wait_server_push = push
wrap_async(_worker.RoutineWorker, "look", "look", lambda self, row, *a: row["spec"].kind == "inbox")
wrap_async(_inbox.Inbox, "poll", "inbox.poll")
wrap_async(_inbox.Inbox, "_connect", "inbox.connect")
wrap_async(_worker, "enqueue", "enqueue")
wrap_async(_worker.RoutineWorker, "_take", "job taken")
wrap_async(_worker, "fire", "fire")
wrap_async(_session.MemorySession, "__aenter__", "session enter")
wrap_async(_session, "orientation", "orientation")
wrap_async(_recall.Recall, "__call__", "recall")
wrap_async(_session.MemorySession, "message", "message")
wrap_async(_session.MemorySession, "send", "send")

STEPS = [
    ("append done", "IDLE EXISTS", "dovecot: APPEND done -> IDLE's EXISTS"),
    ("IDLE EXISTS", "inbox.poll end", "EXISTS -> the look's poll done"),
    ("inbox.poll start", "inbox.poll end", "the poll itself"),
    ("inbox.poll end", "enqueue end", "enqueue"),
    ("enqueue end", "fire start", "queue -> firing start"),
    ("fire start", "session enter end", "firing start -> session entered"),
    ("session enter end", "orientation start", "session entered -> orientation starts"),
    ("orientation start", "orientation end", "orientation"),
    ("recall start", "recall end", "recall"),
    ("recall end", "send end", "archive + send"),
    ("send end", "REQUEST Triage", "claude: send -> first request"),
    ("append done", "REQUEST Triage", "APPEND done -> first request"),
]


def report():
    appends = [i for i, (t, n) in enumerate(EV) if n == "append"]
    mails = []
    for k, i in enumerate(appends):
        end = appends[k + 1] if k + 1 < len(appends) else len(EV)
        first = {}
        for t, n in EV[i:end]:
            first.setdefault(n if not n.startswith("REQUEST Triage") else "REQUEST Triage", t)
        mails.append(first)
    half = len(mails) // 2  # the IDLE routine's mails, then the polling one's; the first of each warms up
    for which, chosen in (("IDLE", mails[1:half]), ("poll", mails[half + 1 :])):
        print(which)
        for a, b, name in STEPS:
            gaps = [m[b] - m[a] for m in chosen if a in m and b in m]
            if gaps:
                print(f"  {name:<42} p50 {statistics.median(gaps):6.3f} s  ({', '.join(f'{g:.2f}' for g in gaps)})")


atexit.register(report)
sys.argv = ["routines.py", *sys.argv[1:]]
bench_mod.main()
