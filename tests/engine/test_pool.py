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
