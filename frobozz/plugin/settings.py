"""Settings of the Claude Code plugin and its memory daemon (FROBOZZ_PLUGIN_* variables)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# seconds each hook waits for the daemon (the first one may start it), and claude's own limit, a little longer
LIMITS = {
    "SessionStart": 10.0,
    "UserPromptSubmit": 5.0,
    "PostToolUse": 5.0,
    "Stop": 5.0,
    "PreCompact": 60.0,
    "SessionEnd": 5.0,
}


class PluginSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: platformdirs.user_data_path("frobozz", appauthor=False))
    plugin_idle: float = Field(
        default=1800.0, gt=0, description="Seconds the memory daemon waits for a hook before it ends itself."
    )
    plugin_deadline: float = Field(
        default=1.0, gt=0, le=60, description="Seconds recall and the orientation may take in the daemon."
    )
    plugin_limits_scale: float = Field(
        default=1.0,
        gt=0,
        le=100,
        description=(
            "Multiplies every hook's time limit when the plugin is installed (a slow machine's, or a test's)."
        ),
    )
    plugin_ask_timeout: float = Field(
        default=50.0,
        gt=0,
        description="Seconds the daemon's sidecar claude may take to write a suggestion or a letter.",
    )
    plugin_failed_for: float = Field(
        default=10.0,
        ge=0,
        description=(
            "Seconds a memory daemon's failure to start answers the next hooks (said, and no daemon started) before "
            "one tries again; written into the plugin when it is installed."
        ),
    )
    plugin_stop_wait: float = Field(
        default=30.0,  # its pool's close alone may take 10 s
        gt=0,
        description="Seconds uninstall gives the memory daemon to stop before it kills it (a wedged one).",
    )

    @property
    def limits(self) -> dict[str, float]:
        return {event: limit * self.plugin_limits_scale for event, limit in LIMITS.items()}

    @property
    def plugin_dir(self) -> Path:
        """Where `frobozz plugin install` writes the plugin and its local marketplace."""
        return self.data_dir / "claude-plugin"

    @property
    def socket(self) -> Path:
        """The daemon's socket: in a private folder under the runtime directory, short enough for AF_UNIX and
        one per data directory (so separate installs, and tests, never share a daemon)."""
        base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
        tag = hashlib.sha256(str(self.data_dir.resolve()).encode()).hexdigest()[:12]
        return base / f"frobozz-{os.getuid()}" / f"memory-{tag}.sock"

    @property
    def log(self) -> Path:
        return self.data_dir / "logs" / "memory-daemon.log"
