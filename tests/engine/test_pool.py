import pytest

from frobozz.engine import EngineError, EnginePool, Result
from frobozz.engine.testing import ApiError, ScriptedModel
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio


async def test_the_sidecar_answers_each_question_on_a_fresh_warm_process(make_options):
    def script(request):
        earlier = sum(m["role"] == "assistant" for m in request.messages)
        return f"answer to: {request.last_user_text()} ({earlier} earlier answers in context)"

    async with ScriptedModel(script) as model:
        async with EnginePool(make_options(model), make_options(model)) as pool:
            first = await pool.sidecar.ask("what is 2+2?")
            second = await pool.sidecar.ask("and 3+3?")
            await pool.primary.send("hello primary")
            primary = await until(pool.primary.events(), Result)
    assert first == "answer to: what is 2+2? (0 earlier answers in context)"
    assert second == "answer to: and 3+3? (0 earlier answers in context)"  # nothing carried over
    assert primary[-1].result == "answer to: hello primary (0 earlier answers in context)"
    assert pool.sidecar.answered == 2


async def test_the_sidecar_keeps_one_claude_for_question_after_question_and_clears_it_between(make_options):
    contexts = []

    def script(request):
        contexts.append(sum(m["role"] == "assistant" for m in request.messages))
        return f"answer to: {request.last_user_text()}"

    async with ScriptedModel(script) as model:
        async with EnginePool(make_options(model), make_options(model)) as pool:
            answers = [await pool.sidecar.ask(f"question {n}?") for n in range(4)]
            started = pool.sidecar.started
    assert answers == [f"answer to: question {n}?" for n in range(4)]
    assert started == 1  # no cold start after the first
    assert contexts == [0, 0, 0, 0]  # no earlier answer in any context: /clear left nothing behind


async def test_a_question_that_fails_takes_its_claude_with_it_and_the_next_gets_a_new_one(make_options):
    def script(request):
        if "fail" in request.last_user_text():
            return ApiError(400, "invalid_request_error", "scripted refusal")
        return f"answer to: {request.last_user_text()}"

    async with ScriptedModel(script) as model:
        async with EnginePool(make_options(model), make_options(model)) as pool:
            assert await pool.sidecar.ask("first?") == "answer to: first?"
            with pytest.raises(EngineError, match="scripted refusal"):
                await pool.sidecar.ask("please fail")
            assert await pool.sidecar.ask("after?") == "answer to: after?"
            started = pool.sidecar.started
    assert started == 2 and pool.sidecar.answered == 2


async def test_a_sidecar_claude_is_replaced_after_its_share_of_questions(make_options):
    async with ScriptedModel(lambda request: f"answer to: {request.last_user_text()}") as model:
        pool = EnginePool(make_options(model), make_options(model))
        pool.sidecar.reuse = 2
        async with pool:
            answers = [await pool.sidecar.ask(f"q{n}") for n in range(5)]
            started = pool.sidecar.started
    assert answers == [f"answer to: q{n}" for n in range(5)] and started == 3


async def test_questions_asked_at_once_each_take_a_warm_sidecar_and_run_side_by_side(make_options):
    import anyio

    async with ScriptedModel(lambda request: f"answer to: {request.last_user_text()}") as model:
        async with EnginePool(make_options(model), make_options(model), sidecars=2) as pool:
            answers = {}

            async def ask(question):
                answers[question] = await pool.sidecar.ask(question)

            async with anyio.create_task_group() as tg:
                for question in ("one?", "two?", "three?"):
                    tg.start_soon(ask, question)
    assert answers == {q: f"answer to: {q}" for q in ("one?", "two?", "three?")} and pool.sidecar.answered == 3


async def test_a_pool_closed_while_a_sidecar_answers_stops_that_claude_rather_than_waiting_for_its_turn(make_options):
    """The answer is nobody's once the pool closes: with claude given all the time in the world to finish, the
    close does not wait for a turn that would take 125 s (a chat's exit waited 10 s for one). Both ways: the
    asker gives up first, or the pool closes under the asker (who is told the claude stopped)."""
    import anyio

    from frobozz.engine import EngineSettings
    from frobozz.engine.testing import Reply, Text

    asked, failures = anyio.Event(), []

    def slowly(request):
        asked.set()
        return Reply((Text("the cello " * 1000),), delay=0.5)  # 250 pieces, half a second each: 125 s

    async def ask(pool: EnginePool) -> None:
        try:
            await pool.sidecar.ask("what comes to mind?")
        except EngineError as e:
            failures.append(str(e))

    async with ScriptedModel(slowly) as model:
        settings = EngineSettings(close_timeout=600)
        with anyio.fail_after(60):
            async with EnginePool(make_options(model), make_options(model), settings=settings) as pool:
                async with anyio.create_task_group() as asking:
                    asking.start_soon(ask, pool)
                    await asked.wait()
                    asking.cancel_scope.cancel()  # the asker gives up; then the pool closes
            asked = anyio.Event()
            async with anyio.create_task_group() as asking:
                async with EnginePool(make_options(model), make_options(model), settings=settings) as pool:
                    asking.start_soon(ask, pool)
                    await asked.wait()
    assert failures and "stopped" in failures[0]
