"""The chat page on the agent service, in a real browser (Debian's chromium, driven by Playwright): a session
started from the page, two tabs on it in step, text streamed in, a tool call folded, a question answered with
a button in one tab and seen answered in both. Screenshots are checked not to be blank."""

from __future__ import annotations

import pytest

from frobozz._loopback import LoopbackServer
from frobozz.agent import Agent, AgentSettings
from frobozz.agent import create_app as agent_app
from frobozz.engine import EngineOptions
from frobozz.engine.testing import ScriptedModel
from frobozz.servers._http import hub_app
from frobozz.web import create_app
from tests.agent.conftest import ACCOUNTS, model_reply
from tests.web.conftest import TOKEN, screenshot


@pytest.fixture
def hub(web_settings, cortex_settings, open_dir, claude_home):
    """The web view at / and the agent service at /agent, behind one token, as `serve all --http` has them."""
    model = ScriptedModel(model_reply).start()
    env = {**model.env(), "HOME": str(claude_home), "CLAUDE_CODE_MAX_RETRIES": "0"}
    agent = Agent(AgentSettings(workspaces=open_dir / "workspaces"), engine_options=EngineOptions(env=env),
                  memory=cortex_settings, accounts=ACCOUNTS)
    app = hub_app([], TOKEN, site=create_app(web_settings), mounts={"agent": agent_app(agent)})
    try:
        with LoopbackServer(app, lifespan="on") as server:
            yield server.url
    finally:
        model.stop()


def started(page, hub: str, workspace: str):
    """`page` on a new session in `workspace`, started from the chat page, idle."""
    page.set_default_timeout(30_000)
    page.goto(f"{hub}/chat?token={TOKEN}")
    page.fill("input[name=workspace]", workspace)
    page.click("#start button")
    page.wait_for_url("**/chat?session=*")
    page.wait_for_selector("#status[data-state=idle]")
    return page


def test_two_tabs_on_one_session_stream_the_same_turn_and_a_question_answered_in_one_is_answered_in_both(
        browser, hub, tmp_path):
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    one = context.new_page()
    one.set_default_timeout(30_000)
    one.goto(f"{hub}/chat?token={TOKEN}")
    one.fill("input[name=workspace]", "alice/notes")
    one.click("#start button")
    one.wait_for_url("**/chat?session=*")
    two = context.new_page()
    two.set_default_timeout(30_000)
    two.goto(one.url)
    for tab in (one, two):
        tab.wait_for_selector("#status[data-state=idle]")
    one.fill("input[name=text]", "hello there")
    one.press("input[name=text]", "Enter")
    for tab in (one, two):
        tab.wait_for_selector(".msg.agent.done")
        assert tab.inner_text(".msg.user") == "hello there"
        assert tab.inner_text(".msg.agent .text").startswith("You said: hello there.")
    two.fill("input[name=text]", "ask me")
    two.press("input[name=text]", "Enter")
    for tab in (one, two):
        tab.wait_for_selector(".question button:text('Blue')")
        tab.wait_for_selector("#status[data-state=waiting]")
    one.click(".question button:text('Blue')")
    for tab in (one, two):
        tab.wait_for_selector(".msg.agent.done >> nth=1")
        assert tab.is_disabled(".question button:text('Red')")  # answered, in this tab or the other
        assert tab.inner_text("details.tool summary") == "tool AskUserQuestion"
        assert '"Which colour for the lamp?"="Blue"' in tab.inner_text(".msg.agent.done >> nth=1")
        assert tab.eval_on_selector_all(".msg.user", "ms => ms.map(m => m.textContent)") == ["hello there", "ask me"]
    screenshot(one, tmp_path / "chat-one.png")
    screenshot(two, tmp_path / "chat-two.png")
    context.close()


def test_the_chat_page_without_the_agent_service_says_how_to_serve_it(page, site):
    page.goto(f"{site}/chat")
    page.fill("input[name=workspace]", "alice/notes")
    page.click("#start button")
    page.wait_for_selector("#problem:not([hidden])")
    assert "serve all --http --workspaces ROOT" in page.inner_text("#problem")


def test_an_image_attached_on_the_chat_page_reaches_the_model_and_a_fake_one_is_refused_clearly(
        browser, hub, tmp_path):
    from tests.agent.test_images import png

    (tmp_path / "lamp.png").write_bytes(png())
    (tmp_path / "fake.png").write_bytes(b"<svg>not a png</svg>")
    page = started(browser.new_page(), hub, "alice/pictures")
    page.set_input_files("#attach-input", str(tmp_path / "lamp.png"))
    page.wait_for_selector("#attached[data-count='1']")
    page.fill("input[name=text]", "what is this?")
    page.press("input[name=text]", "Enter")
    page.wait_for_selector(".msg.agent.done")
    assert page.inner_text(".msg.agent .text").startswith("I see 1 image(s).")
    assert page.get_attribute("#attached", "data-count") == "0"
    page.set_input_files("#attach-input", str(tmp_path / "fake.png"))
    page.fill("input[name=text]", "and this?")
    page.press("input[name=text]", "Enter")
    page.wait_for_selector("#problem:not([hidden])")
    assert "says it is PNG but it is no image" in page.inner_text("#problem")
    page.close()


def test_notify_me_asks_for_notifications_and_says_clearly_when_the_browser_cannot_subscribe(browser, hub):
    context = browser.new_context()
    page = started(context.new_page(), hub, "alice/notes")
    page.click("#notify")  # headless Chromium: permission not granted, or no push service to subscribe with
    page.wait_for_selector("#problem:not([hidden])")
    assert page.inner_text("#problem").startswith("no notifications: ")
    assert page.evaluate("fetch(document.getElementById('chat').dataset.worker).then(r => r.status)") == 200
    context.close()


@pytest.fixture
def kept_spans(web_settings):
    """Tracing on in this process, its spans kept in the web view's database (as `serve all --http --trace` keeps
    them): flush() writes what waits. Off again after the test."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from frobozz.tracing import LocalSpans
    from tests.conftest import _unset_tracer_provider

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(LocalSpans(web_settings.database_url.get_secret_value(), 1)))
    _unset_tracer_provider()
    trace.set_tracer_provider(provider)
    try:
        yield provider.force_flush
    finally:
        provider.shutdown()
        _unset_tracer_provider()


def test_the_chat_page_links_its_session_s_traces_drawn_as_a_waterfall(kept_spans, browser, hub, tmp_path):
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    page = started(context.new_page(), hub, "alice/traced")
    assert page.locator("#trace").is_hidden()  # no turn yet: claude has named no session
    page.fill("input[name=text]", "hello there")
    page.press("input[name=text]", "Enter")
    page.wait_for_selector(".msg.agent.done")
    link = page.wait_for_selector("#trace:not([hidden])")
    session = page.url.rsplit("session=", 1)[1]
    described = page.evaluate("(u) => fetch(u).then((r) => r.json())", f"{hub}/agent/sessions/{session}")
    assert link.get_attribute("href").endswith(f"/traces/{described['claude_session_id']}")
    assert kept_spans(30_000)
    link.click()
    page.wait_for_url("**/traces/*")
    turns = page.locator("#waterfall details.trace")
    assert turns.count() >= 1
    labels = page.locator("#waterfall details.trace[open] .label").all_inner_texts()
    assert any(label.startswith("frobozz.turn") for label in labels)
    assert any(label.startswith("chat ") for label in labels)  # the turn's model request under it
    screenshot(page, tmp_path / "chat-trace.png")
    context.close()
