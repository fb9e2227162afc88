import pytest

from frobozz.engine import EnginePool, Result
from frobozz.engine.testing import ScriptedModel
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
