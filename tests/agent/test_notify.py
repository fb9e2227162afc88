"""Notifications when a question waits and when a turn ends, over real HTTP on 127.0.0.1: Web Push to a local
push service that speaks the protocol (it checks the VAPID signature and decrypts the RFC 8291 payload with the
subscription's keys, as a browser would), and webhooks to receivers that check the HMAC signature — one that is
down and then up, one that stays down and is paused with a record. Foreign and private URLs are refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import os
import socket

import anyio
import http_ece
import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from frobozz._loopback import LoopbackServer
from frobozz.agent import create_app
from tests.agent.test_http import Service, sse
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Browser:
    """A subscription's keys, as a browser makes them: a P-256 key pair and an auth secret."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        self.p256dh = b64(
            self.key.public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
            )
        )


def vapid_ok(header: str, application_key: str, audience: str) -> bool:
    """The push service's check: `vapid t=JWT, k=KEY`, the key the subscription named, the JWT signed by it."""
    fields = dict(part.strip().split("=", 1) for part in header.removeprefix("vapid ").split(","))
    if fields["k"] != application_key:
        return False
    head, claims, signed = fields["t"].split(".")
    raw = unb64(signed)
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(fields["k"]))
    public.verify(
        encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
        f"{head}.{claims}".encode(),
        ec.ECDSA(hashes.SHA256()),
    )  # raises when forged
    return json.loads(unb64(claims))["aud"] == audience


class PushService:
    """Receives pushes for its subscriptions and decrypts them; `gone` ones answer 410 (the browser let go)."""

    def __init__(self) -> None:
        self.browsers: dict[str, Browser] = {}
        self.received: dict[str, list[dict]] = {}
        self.application_key = ""
        self.gone: set[str] = set()

        async def push(request: Request) -> Response:
            name = request.path_params["name"]
            if name in self.gone:
                return Response(status_code=410)
            assert request.headers["content-encoding"] == "aes128gcm"
            assert vapid_ok(request.headers["authorization"], self.application_key, self.server.url)
            browser = self.browsers[name]
            plain = http_ece.decrypt(
                await request.body(), private_key=browser.key, auth_secret=browser.auth, version="aes128gcm"
            )
            self.received.setdefault(name, []).append(json.loads(plain))
            return Response(status_code=201)

        self.server = LoopbackServer(Starlette(routes=[Route("/push/{name}", push, methods=["POST"])]))

    def subscription(self, name: str) -> dict:
        browser = self.browsers[name] = Browser()
        return {
            "endpoint": f"{self.server.url}/push/{name}",
            "keys": {"p256dh": browser.p256dh, "auth": b64(browser.auth)},
        }


class Receiver:
    """Webhook receivers: each checks the signature with its secret; `down` answers 503 that many times."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}
        self.received: dict[str, list[dict]] = {}
        self.down: dict[str, int] = {}
        self.hold = False  # the first request waits, unanswered, while this is so (then 503)
        self.held = False
        self.hosts: list[str] = []
        self.deliveries: dict[str, list[str]] = {}  # each receiver's X-Frobozz-Delivery ids, as they came

        async def hook(request: Request) -> Response:
            name = request.path_params["name"]
            self.hosts.append(request.headers["host"])
            if self.hold and not self.held:
                self.held = True
                await eventually(lambda: not self.hold)  # (the server's own thread: nothing to wait on but the flag)
                return Response(status_code=503)
            if self.down.get(name, 0) > 0:
                self.down[name] -= 1
                return Response(status_code=503)
            body, stamp = await request.body(), request.headers["x-frobozz-timestamp"]
            expected = (
                "sha256="
                + hmac.new(self.secrets[name].encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
            )
            if not hmac.compare_digest(expected, request.headers["x-frobozz-signature"]):
                return Response(status_code=401)
            self.received.setdefault(name, []).append(json.loads(body))
            self.deliveries.setdefault(name, []).append(request.headers["x-frobozz-delivery"])
            return Response(status_code=204)

        self.server = LoopbackServer(Starlette(routes=[Route("/hook/{name}", hook, methods=["POST"])]))


async def ask_and_answer(client: httpx.AsyncClient, session: str, colour: str) -> str:
    """A turn that asks the lamp's colour, answered `colour` once the question is out; the question's id."""
    events: list = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: sse(client, f"/sessions/{session}/events", into=events))
        await client.post(f"/sessions/{session}/messages", json={"text": "ask me"})
        with anyio.fail_after(120):
            await eventually(lambda: any(e["event"] == "question" for e in events), interval=0.02)
        question = next(e for e in events if e["event"] == "question")["data"]["question_id"]
        await client.post(
            f"/sessions/{session}/answers",
            json={"question_id": question, "answers": {"Which colour for the lamp?": colour}},
        )
    return question


async def test_a_question_and_a_finished_turn_reach_push_subscriptions_and_signed_webhooks(make_agent):
    push, receiver = PushService(), Receiver()
    agent = make_agent(loopback_receivers=True, webhook_retries=3, webhook_backoff=0.05, webhook_pause_after=2)
    with Service(agent) as client, push.server, receiver.server:
        assert (await client.get("/webhooks")).json() == {"webhooks": []}  # the empty case
        push.application_key = (await client.get("/push/key")).json()["public_key"]
        assert len(unb64(push.application_key)) == 65  # an uncompressed P-256 point, as browsers want it
        session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        other = (await client.post("/sessions", json={"workspace": "alice/other"})).json()["session_id"]
        for body in (
            {"user": "alice", "subscription": push.subscription("phone")},
            {"session_id": session, "subscription": push.subscription("laptop")},
            {"session_id": other, "subscription": push.subscription("elsewhere")},
            {"user": "alice", "subscription": push.subscription("old")},
        ):
            assert (await client.post("/push/subscriptions", json=body)).status_code == 201
        push.gone.add("old")
        for name, down in (("steady", 0), ("flaky", 2), ("dead", 1000)):
            made = await client.post("/webhooks", json={"user": "alice", "url": f"{receiver.server.url}/hook/{name}"})
            assert made.status_code == 201
            receiver.secrets[name] = made.json()["secret"]
            receiver.down[name] = down
        question = await ask_and_answer(client, session, "Blue")
        with anyio.fail_after(60):

            async def ready() -> object:
                return (
                    len(push.received.get("laptop", [])) >= 2
                    and len(receiver.received.get("flaky", [])) >= 2
                    and (await client.get("/webhooks")).json()["webhooks"][2]["paused_at"]
                )

            await eventually(ready)
        hooks = (await client.get("/webhooks")).json()["webhooks"]
    for name in ("phone", "laptop"):  # the user's and the session's subscriptions; not another session's
        asked, done = push.received[name]
        assert asked["type"] == "question" and asked["question_id"] == question and asked["session_id"] == session
        assert [a["action"] for a in asked["actions"]] == ["Red", "Blue"]  # answer buttons
        assert done["type"] == "done" and "Blue" in done["body"]
    assert "elsewhere" not in push.received and "old" not in push.received
    for name in ("steady", "flaky"):  # signed, and the flaky one got both once it came up
        assert sorted((d["type"], d["user"]) for d in receiver.received[name]) == [
            ("done", "alice"),
            ("question", "alice"),
        ]
    assert [(h["url"].rsplit("/", 1)[-1], h["failures"]) for h in hooks] == [("steady", 0), ("flaky", 0), ("dead", 2)]
    assert hooks[2]["paused_reason"].startswith("2 deliveries in a row failed") and "503" in hooks[2]["paused_reason"]
    assert hooks[0]["paused_at"] is None and "secret" not in hooks[0]


async def test_foreign_and_private_receivers_and_malformed_subscriptions_are_refused_and_nothing_is_kept(make_agent):
    with Service(make_agent(loopback_receivers=True)) as client:
        keys = {"p256dh": Browser().p256dh, "auth": b64(os.urandom(16))}
        for subscription, says in (
            ({"endpoint": "http://example.com/push", "keys": keys}, "must be https"),
            ({"endpoint": "https://10.1.2.3/push", "keys": keys}, "private address"),
            ({"endpoint": "https://169.254.169.254/x", "keys": keys}, "private address"),
            ({"endpoint": "https://user:pw@127.0.0.1/x", "keys": keys}, "no user"),
            ({"endpoint": "https://127.0.0.1/x"}, "a subscription is"),
            ({"endpoint": "https://127.0.0.1/x", "keys": {"p256dh": 1}}, "keys p256dh"),
            ("nonsense", "a subscription is"),
        ):
            refused = await client.post("/push/subscriptions", json={"user": "alice", "subscription": subscription})
            assert refused.status_code == 400 and says in refused.json()["error"], (subscription, refused.json())
        for url, says in (
            ("http://10.0.0.1/hook", "private address"),
            ("http://169.254.169.254/", "private"),
            ("http://[::ffff:192.168.1.1]/", "private"),
            ("ftp://127.0.0.1/x", "http or https"),
            ("http:///nohost", "needs a host"),
            (7, "a string"),
            ("https://" + "a" * 3000, "2000"),
        ):
            refused = await client.post("/webhooks", json={"user": "alice", "url": url})
            assert refused.status_code == 400 and says in refused.json()["error"], (url, refused.json())
        for body in ({"url": "http://127.0.0.1:9/x"}, {"user": "../x", "url": "http://127.0.0.1:9/x"}):
            assert (await client.post("/webhooks", json=body)).status_code == 400
        assert (await client.get("/webhooks")).json() == {"webhooks": []}
        assert (await client.delete("/webhooks/" + "0" * 32)).status_code == 404
        assert (await client.delete("/push/subscriptions/" + "0" * 32)).status_code == 404
    with Service(make_agent()) as client:  # no loopback receivers: this machine is private too
        refused = await client.post("/webhooks", json={"user": "alice", "url": "http://127.0.0.1:9/x"})
        assert refused.status_code == 400 and "private address" in refused.json()["error"]


async def test_a_webhook_goes_to_the_address_its_name_was_checked_at_and_a_name_that_turns_private_is_refused(
    cortex_settings, tmp_path
):
    """DNS pinned: `hook.test` resolves (here) only through the service's own look-up, so a delivery that arrives
    went to the address that was checked, not to a second look-up; when the name later resolves to the metadata
    address, the next try is refused before anything is sent and counted against the webhook."""
    from frobozz.agent import AgentSettings, Done, Logged
    from frobozz.agent._notify import Notifier
    from frobozz.agent._store import AgentStore

    receiver, looked_up = Receiver(), []
    answers = {"hook.test": ["127.0.0.1"]}

    async def resolve(host, port, **_):
        looked_up.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in answers[host]]

    store = await AgentStore.open(cortex_settings)
    settings = AgentSettings(workspaces=tmp_path, loopback_receivers=True, webhook_retries=1, webhook_poll=0.2)
    notifier = Notifier(store.pool, settings, "pinning", resolve=resolve)
    try:
        with receiver.server:
            port = httpx.URL(receiver.server.url).port
            hook = await notifier.add_webhook("alice", f"http://hook.test:{port}/hook/named")
            receiver.secrets["named"] = hook["secret"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(notifier.outbox.deliver_forever)
                await notifier.notify("s1", "alice", Logged(seq=3, event=Done(result="first")))
                with anyio.fail_after(60):
                    await eventually(lambda: receiver.received.get("named"))
                answers["hook.test"] = ["127.0.0.1", "169.254.169.254"]  # rebound: one answer is the metadata address
                await notifier.notify("s1", "alice", Logged(seq=4, event=Done(result="second")))
                with anyio.fail_after(60):

                    async def ready() -> object:
                        return (await notifier.webhooks(["alice"]))[0]["failures"] >= 1

                    await eventually(ready)
                tg.cancel_scope.cancel()
        assert receiver.hosts == [f"hook.test:{port}"]  # one request, named in Host, at the address checked
        assert [d["body"] for d in receiver.received["named"]] == ["first"]
        assert looked_up == ["hook.test"] * 3  # registration, and once per try: never again for the connection
        assert await notifier.outbox.pending() == []  # the refused one is given up on, not retried
    finally:
        await notifier.aclose()
        await store.aclose()


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        (["93.184.216.34", "10.0.0.1"], "10.0.0.1, a private address"),  # one private answer among public ones
        (["100.64.0.1"], "a private address"),  # carrier-grade NAT
        (["::ffff:10.0.0.1"], "a private address"),  # IPv4 inside IPv6
        (["fe80::1%eth0"], "a private address"),  # link-local with a zone
        (["169.254.169.254"], "a private address"),
        (["127.0.0.1"], "a private address"),  # loopback, when loopback receivers are off
        (["93.184.216.34"], "plain http only"),
        ([], "does not resolve"),
        (OSError("no such name"), "does not resolve"),
        (["not an address"], "does not resolve"),
    ],
)
async def test_a_name_resolving_to_a_forbidden_address_or_to_nothing_is_refused_clearly(answers, says):
    from frobozz.agent import InputError
    from frobozz.agent._addresses import pinned

    async def resolve(host, port, **_):
        if isinstance(answers, Exception):
            raise answers
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in answers]

    with pytest.raises(InputError, match=says.replace(".", r"\.")):
        await pinned("http://hook.test/x", https_only=False, loopback=False, resolve=resolve)


async def test_what_happens_while_a_webhook_is_paused_is_kept_bounded_and_delivered_in_order_on_resumption(
    cortex_settings, tmp_path
):
    """A receiver that is down: the first delivery is given up on, the second pauses the webhook (and is kept);
    five events while paused are kept too, but the bound (5) lets the oldest go, counted; nothing is sent while
    paused; the receiver comes up and the webhook is resumed: every kept event arrives once, in order, signed,
    with its own delivery id."""
    from frobozz.agent import AgentSettings, Done, Logged
    from frobozz.agent._notify import Notifier
    from frobozz.agent._store import AgentStore

    receiver = Receiver()
    store = await AgentStore.open(cortex_settings)
    settings = AgentSettings(
        workspaces=tmp_path,
        loopback_receivers=True,
        webhook_retries=1,
        webhook_pause_after=2,
        webhook_poll=0.2,
        webhook_keep=5,
    )
    notifier = Notifier(store.pool, settings, "pausing")
    try:
        with receiver.server:
            assert await notifier.outbox.pending() == []  # the empty case
            assert await notifier.resume_webhook("0" * 32, None) is None
            hook = await notifier.add_webhook("alice", f"{receiver.server.url}/hook/later")
            receiver.secrets["later"], receiver.down["later"] = hook["secret"], 10**6
            async with anyio.create_task_group() as tg:
                tg.start_soon(notifier.outbox.deliver_forever)
                for seq in (1, 2):
                    await notifier.notify("s1", "alice", Logged(seq=seq, event=Done(result=f"turn {seq}")))
                with anyio.fail_after(60):

                    async def paused() -> object:
                        return (await notifier.webhooks(["alice"]))[0]["paused_at"]

                    await eventually(paused)
                assert [p["delivery"] for p in await notifier.outbox.pending()] == ["s1:2"]  # kept: it paused it
                for seq in range(3, 8):
                    await notifier.notify("s1", "alice", Logged(seq=seq, event=Done(result=f"turn {seq}")))
                    assert await notifier.outbox.queue("alice", None, f"s1:{seq}", {"again": True}) == 0  # once
                kept = [p["delivery"] for p in await notifier.outbox.pending()]
                assert kept == [f"s1:{seq}" for seq in range(3, 8)]  # the bound: the oldest went
                (listed,) = await notifier.webhooks(["alice"])
                assert (listed["waiting"], listed["dropped"], listed["failures"]) == (5, 1, 2)
                assert "later" not in receiver.received  # nothing sent while paused
                receiver.down["later"] = 0  # the receiver comes up
                assert await notifier.resume_webhook(hook["id"], ["bob"]) is None  # not bob's to resume
                assert await notifier.resume_webhook(hook["id"], ["alice"]) == {"waiting": 5, "dropped": 1}
                with anyio.fail_after(60):

                    async def delivered() -> bool:
                        return len(receiver.received.get("later", [])) >= 5 and not await notifier.outbox.pending()

                    await eventually(delivered)
                tg.cancel_scope.cancel()
        assert receiver.deliveries["later"] == kept  # once each, in order, with the same ids
        assert [d["body"] for d in receiver.received["later"]] == [f"turn {seq}" for seq in range(3, 8)]
        (listed,) = await notifier.webhooks(["alice"])
        assert (listed["paused_at"], listed["failures"], listed["waiting"], listed["dropped"]) == (None, 0, 0, 0)
    finally:
        await notifier.aclose()
        await store.aclose()


async def test_a_push_connects_to_the_address_the_guard_checked_whatever_the_name_resolves_to_later():
    """The resolver a push's aiohttp session gets answers every look-up with the checked address: `push.test`
    (which nothing else here resolves) reaches the loopback server it was checked at."""
    import aiohttp

    from frobozz.agent._notify import _OneAddress

    hosts = []

    async def seen(request: Request) -> Response:
        hosts.append(request.headers["host"])
        return Response(status_code=201)

    with LoopbackServer(Starlette(routes=[Route("/push", seen, methods=["POST"])])) as server:
        port = httpx.URL(server.url).port
        connector = aiohttp.TCPConnector(resolver=_OneAddress(ipaddress.ip_address("127.0.0.1")))
        async with aiohttp.ClientSession(connector=connector, trust_env=False) as http:
            async with http.post(f"http://push.test:{port}/push", data=b"x") as answer:
                assert answer.status == 201
    assert hosts == [f"push.test:{port}"]


async def test_a_tokens_webhook_gets_its_sessions_events_a_users_gets_all_of_the_users_and_nothing_else(make_agent):
    """Behind scoped tokens: app-a and app-b act for alice, app-c for bob. alice's webhook gets the events of
    both tokens' sessions of hers, each token's webhook only those of the sessions it made, bob's only his; a
    token cannot register, see, resume or remove another token's webhook."""
    from frobozz.servers._auth import ScopedTokens
    from frobozz.servers._grants import Grant, hashed

    secrets = {name: f"{name}-token-0123456789abcdef" for name in ("app-a", "app-b", "app-c")}
    grants = [
        Grant(name=name, sha256=hashed(secret), servers=["agent"], users=["bob" if name == "app-c" else "alice"])
        for name, secret in secrets.items()
    ]
    receiver = Receiver()
    agent = make_agent(loopback_receivers=True, webhook_poll=0.2)
    server = LoopbackServer(ScopedTokens(create_app(agent), grants, frozenset(), only="agent"), lifespan="on")
    with server, receiver.server:
        clients = {
            name: httpx.AsyncClient(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {s}"})
            for name, s in secrets.items()
        }
        a, b, c = clients.values()
        assert (await a.get("/webhooks")).json() == {"webhooks": []}  # the empty case
        hooks = {}
        for client, body in (
            (a, {"user": "alice"}),
            (a, {"token": "app-a"}),
            (b, {"token": "app-b"}),
            (c, {"user": "bob"}),
        ):
            name = body.get("user") or body["token"]
            made = await client.post("/webhooks", json={**body, "url": f"{receiver.server.url}/hook/{name}"})
            assert made.status_code == 201, made.text
            hooks[name], receiver.secrets[name] = made.json()["id"], made.json()["secret"]
        refused = await a.post("/webhooks", json={"token": "app-b", "url": f"{receiver.server.url}/hook/stolen"})
        assert refused.status_code == 403 and "itself only" in refused.json()["error"]
        for bad in ({"token": "app-a", "user": "alice"}, {"token": ""}, {"token": "../x"}, {"token": ["app-a"]}):
            assert (await a.post("/webhooks", json={**bad, "url": f"{receiver.server.url}/hook/x"})).status_code == 400
        assert sorted(h["user"] or h["token"] for h in (await a.get("/webhooks")).json()["webhooks"]) == [
            "alice",
            "app-a",
        ]  # not app-b's, though app-b acts for alice too
        assert (await a.post(f"/webhooks/{hooks['app-b']}/resume")).status_code == 404
        assert (await a.delete(f"/webhooks/{hooks['app-b']}")).status_code == 404
        assert (await a.post(f"/webhooks/{hooks['app-a']}/resume")).json() == {"ok": True, "waiting": 0, "dropped": 0}
        sessions = {}
        for name, client, space in (("app-a", a, "alice/one"), ("app-b", b, "alice/two"), ("app-c", c, "bob/three")):
            made = await client.post("/sessions", json={"workspace": space})
            sessions[name] = made.json()["session_id"]
            assert (await client.get(f"/sessions/{sessions[name]}")).json()["token"] == name
        await ask_and_answer(a, sessions["app-a"], "Red")
        for name, client in (("app-b", b), ("app-c", c)):
            await client.post(f"/sessions/{sessions[name]}/messages", json={"text": "hello"})

        async def waiting() -> int:
            listed = [(await client.get("/webhooks")).json()["webhooks"] for client in (a, b, c)]
            return sum(h["waiting"] for hooks in listed for h in hooks)

        with anyio.fail_after(120):  # each event is queued for all its webhooks at once: then the outbox empties

            async def delivered() -> bool:
                return (
                    len(receiver.received.get("alice", [])) >= 3
                    and bool(receiver.received.get("bob"))
                    and not await waiting()
                )

            await eventually(delivered)
        for client in clients.values():
            await client.aclose()

    def got(name: str) -> list[tuple[str, str, str | None]]:
        return sorted((d["session_id"], d["type"], d["token"]) for d in receiver.received.get(name, []))

    one, two, three = sessions["app-a"], sessions["app-b"], sessions["app-c"]
    assert got("alice") == sorted([(one, "question", "app-a"), (one, "done", "app-a"), (two, "done", "app-b")])
    assert got("app-a") == sorted([(one, "question", "app-a"), (one, "done", "app-a")])
    assert got("app-b") == [(two, "done", "app-b")]
    assert got("bob") == [(three, "done", "app-c")]
    assert "stolen" not in receiver.received and "x" not in receiver.received
