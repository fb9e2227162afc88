"""Settings of the dialogue part, read from FROBOZZ_DIALOGUE_* environment variables (and an optional .env)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The one place the fallback phrases live: an entry whose content holds one of them (any case) counts as
# consensus, for dialogues written before the `consensus` field (and agents that forget to set it).
CONSENSUS_PHRASES = (
    "we have reached consensus",
    "consensus reached",
    "i fully agree with",
    "we are in full agreement",
)


class DialogueSettings(BaseSettings):
    """Limits and phrases of a dialogue; each field is FROBOZZ_DIALOGUE_<NAME> in the environment."""

    model_config = SettingsConfigDict(
        env_prefix="FROBOZZ_DIALOGUE_", env_ignore_empty=True, env_file=".env", extra="ignore"
    )

    consensus_phrases: tuple[str, ...] = Field(
        default=CONSENSUS_PHRASES, description="Phrases that signal consensus in an entry's content (a JSON list)."
    )
    max_question_bytes: int = Field(default=1024 * 1024, ge=1, description="Largest question file taken.")
    max_prompt_bytes: int = Field(default=256 * 1024, ge=1, description="Largest role prompt file taken.")
    max_content_chars: int = Field(
        default=100_000,
        ge=1,
        description=(
            "Longest content one entry may hold, and longest summary or synthesis the scribe may write (characters)."
        ),
    )
    turn_timeout: float = Field(default=900.0, gt=0, description="Seconds one agent's turn may take.")
    max_turns: int = Field(default=30, ge=1, description="Model requests one agent's turn may make.")
