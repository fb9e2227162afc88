"""The arrows of shared/design.md hold: each part imports only the parts it may."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "frobozz"
# part -> the parts of Frobozz it may import (its own modules always, and the small shared helpers, frobozz/_*.py)
ALLOWED = {
    "engine": set(),
    "games": set(),
    "memory": set(),
    "loop": {"engine", "memory"},
    "routines": {"engine", "games", "loop", "memory", "runner"},  # a firing is a memory-loop session recorded as a run
    "servers": {"games", "memory"},
    "runner": {"engine", "games", "loop", "memory"},
    "web": {
        "games",
        "memory",
        "routines",
        "runner",
        "tracing",
    },  # reads runs, routines, memory and kept spans (public APIs)
    "agent": {"engine", "loop", "memory"},  # never servers or runner: MCP configs are data it hands to claude
    "dialogue": {"engine"},  # orchestrator, skeletons, consensus on the engine: no MCP, no memory
    "plugin": {"engine", "loop", "memory"},  # its hooks' daemon runs the loop; the hook itself imports nothing
    "tracing": set(),  # the SDK's set-up: the parts emit spans through the API (frobozz/_spans.py), never import it
}
LEAVES = {p.stem for p in PACKAGE.glob("_*.py")} - {"__init__", "__main__"}


def _imported_parts(path: Path) -> set[str]:
    """The top-level parts of frobozz that a module imports, absolute or relative."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    parts = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module[: len(module) - node.level]
            target = [*base, *(node.module or "").split(".")] if node.module else list(base)
            names = [target] if node.module or len(target) > 1 else [[*target, a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module.split(".")]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        else:
            continue
        parts |= {n[1] for n in names if len(n) > 1 and n[0] == "frobozz"}
    return parts


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_each_part_imports_only_the_parts_the_design_allows(part):
    for path in (PACKAGE / part).rglob("*.py"):
        wrong = _imported_parts(path) - ALLOWED[part] - LEAVES - {part}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports frobozz.{', frobozz.'.join(sorted(wrong))}"


def test_the_servers_stand_alone_and_share_only_their_helpers():
    servers = PACKAGE / "servers"
    names = {p.name for p in servers.iterdir() if p.is_dir() and not p.name.startswith("_")}
    for path in servers.glob("*/**/*.py"):  # the shared helpers (servers/_*.py) may name every server
        own = path.relative_to(servers).parts[0]
        text = path.read_text(encoding="utf-8")
        for other in names - {own}:
            assert f"from ..{other}" not in text and f"frobozz.servers.{other}" not in text, (
                f"{path.relative_to(PACKAGE)} imports the {other} server"
            )


def test_nothing_but_the_cli_imports_the_web_view():
    for path in PACKAGE.rglob("*.py"):
        part = path.relative_to(PACKAGE).parts[0]
        if part not in ("cli", "web"):
            assert "web" not in _imported_parts(path), f"{path.relative_to(PACKAGE)} imports frobozz.web"


def test_only_the_cli_uses_the_dialogue_part():
    for path in PACKAGE.rglob("*.py"):
        part = path.relative_to(PACKAGE).parts[0]
        if part not in ("cli", "dialogue"):
            assert "dialogue" not in _imported_parts(path), f"{path.relative_to(PACKAGE)} imports frobozz.dialogue"


def _imported_modules(path: Path) -> list[tuple[str, ...]]:
    """The frobozz modules a module imports, as dotted parts (relative imports resolved)."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module[: len(module) - node.level]
            found.append((*base, *(node.module or "").split(".")) if node.module else tuple(base))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(tuple(node.module.split(".")))
        elif isinstance(node, ast.Import):
            found += [tuple(a.name.split(".")) for a in node.names]
    return [m for m in found if len(m) > 1 and m[0] == "frobozz"]


def test_a_part_uses_another_only_through_its_public_init_never_a_private_module():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        own = path.relative_to(PACKAGE).parts[0]
        for target in _imported_modules(path):
            if target[1] != own and any(name.startswith("_") for name in target[2:]):
                wrong.append(f"{path.relative_to(PACKAGE)} imports {'.'.join(target)}")
    assert not wrong, "\n".join(wrong)


def _all_order(name: str) -> tuple[int, str]:
    """isort's order for __all__ (ruff's RUF022): CONSTANTS, then Classes, then functions, each alphabetical."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def test_every_init_only_re_exports_with_a_sorted_all():
    for path in PACKAGE.rglob("__init__.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                names = [e.value for e in node.value.elts]
                assert names == sorted(names, key=_all_order), f"{path.relative_to(PACKAGE)}: __all__ is not sorted"


def test_product_code_never_imports_the_test_doubles():
    """`frobozz.engine.testing` is for tests; the scripted model product code runs on is `engine.scripted`."""
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "engine" / "testing"):
            continue
        for target in _imported_modules(path):
            assert target[1:3] != ("engine", "testing"), f"{path.relative_to(PACKAGE)} imports frobozz.engine.testing"


# Names that more than one part exports for things that differ, and why each may: a convention every part of
# a kind follows, said with the part's name in front.
SAME_NAME_ANOTHER_THING = {
    "Settings": "each MCP server's own settings (frobozz.servers.game.Settings, …), by the servers' convention",
    "create_server": "each MCP server's factory, by the servers' convention",
    "create_app": "each ASGI part's factory (agent, web), by the same convention",
    "install": "games.install (a story file) and plugin.install (the plugin): the CLI's `games install`, "
    "`plugin install`",
    "enqueue": "runner.enqueue (runs) and routines.enqueue (a firing): both put work on the one run queue",
    "Thinking": "engine.Thinking (the option) and engine.scripted.Thinking (a scripted reply's block); the "
    "scripted model's blocks are used across the tests",
    "ToolUse": "agent.ToolUse (an agent event) and engine.scripted.ToolUse (a scripted reply's block)",
}


def test_a_name_two_parts_export_means_one_thing():
    """`SessionStore` was the engine's protocol and memory's loop-session table: a name exported twice is the
    same object, or is listed above with its reason."""
    import importlib

    exported: dict[str, dict[int, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("__init__.py")):
        package = ".".join(path.relative_to(PACKAGE.parent).parent.parts)
        if package.startswith("frobozz.cli") or package == "frobozz":
            continue
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            exported.setdefault(name, {}).setdefault(id(getattr(module, name)), []).append(package)
    twice = {
        name: sorted(p for ps in found.values() for p in ps)
        for name, found in exported.items()
        if len(found) > 1 and name not in SAME_NAME_ANOTHER_THING
    }
    assert not twice, f"one name, two meanings: {twice}"
