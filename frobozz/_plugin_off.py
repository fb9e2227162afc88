"""The Frobozz Claude Code plugin's off switch (a leaf module that imports nothing of Frobozz).

A claude that Frobozz runs the memory loop around itself (chat's primary and sidecar, a routine's firing and its
sidecar) is started with `PLUGIN_OFF_ENV` set: with the plugin installed in the user's Claude Code, its hooks would
run the loop a second time in that claude (a plugin daemon started, three more sessions archived for one turn, the
sidecar's own questions among them). The user's other plugins and settings load as they are. The plugin's hook
reads the same name: it is standard library only and spells it itself (`OFF_ENV` in `frobozz/plugin/_hook.py`)."""

from __future__ import annotations

from collections.abc import Mapping

PLUGIN_OFF_ENV = "FROBOZZ_PLUGIN_OFF"


def plugin_off(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (a claude's environment beside the inherited one) with the Frobozz plugin's hooks off."""
    return {**(env or {}), PLUGIN_OFF_ENV: "1"}
