"""A stand-in for the sidecar's `ask` where the real one is not the point: it answers one text and
keeps the prompts it was given."""


def answering(text: str):
    prompts: list[str] = []

    async def ask(prompt: str) -> str:
        prompts.append(prompt)
        return text

    return ask, prompts
