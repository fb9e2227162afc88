"""The README stays a newcomer's page, and what it links to and lists is there (the docs site's own links are
checked by `mkdocs build --strict`, which bin/test runs)."""

import re
from pathlib import Path

import typer.main
from markdown.extensions.toc import slugify

from frobozz.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _headings(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_the_readme_is_short_enough_for_a_newcomer_and_starts_with_the_two_commands():
    assert len(README.splitlines()) < 200
    first = README.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[0] for line in first] == ["bin/frobozz", "bin/test"]


def test_every_link_in_the_readme_reaches_a_file_and_heading_that_exist():
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", README)
    assert links
    for target, anchor in links:
        if target.startswith(("http://", "https://")):
            continue
        path = ROOT / target
        assert path.exists(), f"README links to {target}, which is not there"
        if anchor:
            assert anchor in _headings(path), f"README links to {target}#{anchor}: no such heading"


def test_the_commands_table_names_every_command_the_cli_has():
    group = typer.main.get_command(app)
    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    for name in group.commands:
        assert f"`frobozz {name}" in table, f"the README's commands table leaves out `frobozz {name}`"
    for server in ("cortex", "fetch", "forge", "handoff", "game", "all", "agent"):
        assert server in table.split("`frobozz serve", 1)[1]


def test_every_frobozz_command_line_in_the_readme_uses_options_the_command_has():
    group = typer.main.get_command(app)
    blocks = re.findall(r"```sh\n(.*?)```", README.replace("\\\n", " "), re.S)
    lines = [
        line.split("bin/frobozz ", 1)[1] for block in blocks for line in block.splitlines() if "bin/frobozz " in line
    ]
    assert len(lines) > 10
    for line in lines:
        words = line.split("#", 1)[0].replace(";", " ").split()
        command = group  # typer's own click: a group is what has commands
        while hasattr(command, "commands") and words and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        assert not hasattr(command, "commands"), f"README: `frobozz {line}` names no command"
        known = {name for param in command.params for name in getattr(param, "opts", [])}
        for word in words:
            flag = word.split("=", 1)[0]
            if flag.startswith("--"):
                assert flag in known, f"README: `frobozz {line.strip()}`: {command.name} has no {flag}"


def _settings_fields():
    """(the variables that set it, its field) for every setting of every part."""
    import importlib
    import pkgutil

    from pydantic_settings import BaseSettings

    import frobozz
    from frobozz.cli._app import _subclasses

    for module in pkgutil.walk_packages(frobozz.__path__, "frobozz."):
        if module.name.endswith(".settings"):
            importlib.import_module(module.name)
    for settings in {cls for cls in _subclasses(BaseSettings) if cls.__module__.startswith("frobozz.")}:
        prefix = settings.model_config.get("env_prefix") or ""
        for name, field in settings.model_fields.items():
            alias = field.validation_alias
            yield (
                [str(n).upper() for n in (alias.choices if hasattr(alias, "choices") else [alias or prefix + name])],
                field,
            )


def test_every_setting_of_every_part_is_in_the_docs_under_its_variable():
    """By its full name, which a reader can search for."""
    docs = " ".join(path.read_text(encoding="utf-8") for path in (ROOT / "docs").glob("*.md"))
    documented = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", docs))
    fields = list(_settings_fields())
    missing = [names[-1] for names, _ in fields if not documented.intersection(names)]
    assert len(fields) > 100 and sorted(set(missing)) == []


def test_each_default_a_settings_table_gives_as_a_plain_number_is_the_one_the_code_has():
    """A table row `| `VAR`, `VAR2` | default, default2 | ... |`: a default written as a bare number (not "5 MiB",
    not "unset") is compared with the field's (the docs said 10 s where uninstall waited 30)."""
    given: dict[str, set[str]] = {}
    for path in (ROOT / "docs").glob("*.md"):
        for line in path.read_text(encoding="utf-8").splitlines():
            cells = [c.strip() for c in line.split("|")]
            names = re.findall(r"`(FROBOZZ_[A-Z0-9_]+)`", cells[1]) if len(cells) > 3 else []
            defaults = [d.strip() for d in cells[2].split(",")] if names else []
            if names and len(defaults) == len(names):
                for name, default in zip(names, defaults, strict=True):
                    given.setdefault(name, set()).add(default)
    compared, wrong = 0, []
    for names, field in _settings_fields():
        number = field.default
        if isinstance(number, bool) or not isinstance(number, int | float):
            continue
        for written in (d for name in names for d in given.get(name, ()) if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", d)):
            compared += 1
            if float(written) != float(number):
                wrong.append(f"{names[-1]}: the docs say {written}, the code has {number}")
    assert compared > 30 and wrong == []
