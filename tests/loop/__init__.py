"""A stand-in for the sidecar's `ask` where the real one is not the point: it answers one text and
keeps the prompts it was given; and a guard for background work's steps that leaves one out."""

from frobozz.loop import LeftOut


def answering(text: str):
    prompts: list[str] = []

    async def ask(prompt: str) -> str:
        prompts.append(prompt)
        return text

    return ask, prompts


def leaving_out(part: str):
    """A guard that takes each step but `part`, which it leaves out; and the steps it was given, in order."""
    given: list[str] = []

    async def step(name, work):
        given.append(name)
        if name == part:
            work.close()
            raise LeftOut(name)
        return await work

    return step, given
