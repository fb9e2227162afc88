"""The interpreter's own process: jericho behind a framed pickle pipe on stdin/stdout.

Run as a script, `python -P …/_worker.py`, not as part of its package: importing `frobozz.games` first
cost 0.2 s of CPU at every game's start, for nothing the worker uses. A story file that crashes frotz takes
only this process down. Requests are `(op, args)` tuples; answers are `("ok", value)` or `("error", message)`.
The real stdout is moved aside first, so whatever the C library prints cannot corrupt a frame.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import struct
import sys
import warnings
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from ._zmachine import ZMemory

_LEN = struct.Struct(">I")


def write_frame(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LEN.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: BinaryIO) -> Any:
    head = stream.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    (size,) = _LEN.unpack(head)
    return pickle.loads(stream.read(size))


class Interpreter:
    """One jericho environment and the requests it answers."""

    def __init__(self, path: str, seed: int | None) -> None:
        import jericho

        self._zmemory = _zmemory_class()
        with open(path, "rb") as f:
            self.story = f.read()
        self.env = jericho.FrotzEnv(path, seed=seed)
        self.supported = bool(self.env.is_fully_supported)
        self._room_depth: int | None = None  # how deep in the object tree rooms are, learnt at the start

    # -- requests --------------------------------------------------------------------------
    def load(self) -> dict[str, Any]:
        text, _ = self.env.reset()
        self._room_depth = len(self._ancestors()) or None
        return {
            **self._observe(text),
            "supported": self.supported,
            "max_score": self.env.get_max_score() if self.supported else None,
            "walkthrough": self.env.get_walkthrough() if self.supported else [],
        }

    def step(self, command: str) -> dict[str, Any]:
        text, _, _, _ = self.env.step(command)
        return self._observe(text)

    def peek(self, command: str) -> dict[str, Any]:
        state = self.env.get_state()
        try:
            text, _, _, _ = self.env.step(command)
            return self._observe(text, with_state=False)
        finally:
            self.env.set_state(state)

    def set_state(self, state: tuple) -> dict[str, Any]:
        self.env.set_state(state)
        return self._observe("", with_state=False)

    def valid_actions(self) -> list[str]:
        import jericho.util

        if "spacy_nlp" not in vars(jericho.util):  # offline: a blank pipeline, never a download
            import spacy

            jericho.util.spacy_nlp = spacy.blank("en")
        return self.env.get_valid_actions(use_parallel=False)

    # -- status ----------------------------------------------------------------------------
    def _observe(self, text: str, *, with_state: bool = True) -> dict[str, Any]:
        env = self.env
        memory = self._zmemory(env._get_ram().tobytes(), self.story)
        if self.supported:  # jericho knows where the player is; its short names drop words, so decode ours
            room = self._room()
            obs = {
                "score": env.get_score(),
                "moves": env.get_moves(),
                "location": memory.object_name(room) if room else None,
                "done": env.game_over() or env.victory(),
                "won": env.victory(),
            }
        else:
            status = memory.status()
            obs = {"score": status.score, "moves": status.moves, "location": status.location, "done": None, "won": None}
        obs["text"] = text
        obs["halted"] = env._emulator_halted()
        if with_state:
            obs["state"] = env.get_state()
        return obs

    def _ancestors(self) -> list[int]:
        """The player's parent, its parent, and so on up to the object tree's root."""
        found: list[int] = []
        obj = self.env.get_player_object()
        while obj is not None and obj.parent and obj.parent not in found and len(found) < 32:
            found.append(obj.parent)
            obj = self.env.get_object(obj.parent)
        return found

    def _room(self) -> int | None:
        """The room the player is in. jericho's location is the player's parent, which is a vehicle or a
        seat when the player is in one (Zork I's "magic boat"); rooms sit as deep in the object tree as the
        room the game starts in (Infocom's under one ROOMS object, Inform's at the root), so the room is the
        ancestor at that depth."""
        ancestors = self._ancestors()
        if not ancestors:
            return None
        depth = self._room_depth or len(ancestors)
        return ancestors[max(0, len(ancestors) - depth)]


def _zmemory_class() -> type[ZMemory]:
    """`_zmachine.ZMemory`, from the package when this module was imported as part of it, else from its file
    beside this one (its only neighbour here, and a leaf: it imports nothing of Frobozz)."""
    if __package__:
        from ._zmachine import ZMemory

        return ZMemory
    name = "_frobozz_games_zmachine"
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), "_zmachine.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up while the classes are made)
    spec.loader.exec_module(module)
    zmemory: type[ZMemory] = module.ZMemory
    return zmemory


def main() -> None:
    warnings.simplefilter("ignore")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed from here on goes to stderr, not into the protocol
    proto_in = sys.stdin.buffer
    interp: Interpreter | None = None
    while True:
        try:
            op, args = read_frame(proto_in)
        except EOFError:
            return
        try:
            if op == "open":
                interp = Interpreter(*args)
                value: Any = interp.load()
            elif interp is None:
                raise RuntimeError("no story loaded")
            else:
                value = getattr(interp, op)(*args)
            write_frame(proto_out, ("ok", value))
        except Exception as e:  # noqa: BLE001 - an answer, never a dead pipe
            write_frame(proto_out, ("error", f"{type(e).__name__}: {e}"))


if __name__ == "__main__":
    main()
