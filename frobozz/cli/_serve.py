"""`frobozz serve NAME`: run one MCP server over stdio; `frobozz serve all --http`: all of them in one
process over streamable HTTP."""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from frobozz.servers import MIN_TOKEN_CHARS, SERVERS, load_server

from ._output import err
from ._server import Server
from ._trace import start_tracing, trace_option


def _token_given(ctx: typer.Context, param: Any, value: str | None) -> str | None:
    """The one token, refused at once when it is too short, named as it was given: `--token`, or the variable
    (a bad setting is one line naming its variable; FROBOZZ_HUB_TOKEN=short was said as a bad `--token`)."""
    if value is not None and len(value) < MIN_TOKEN_CHARS:
        source = ctx.get_parameter_source(param.name)  # (by its name: typer's click may not be the `click` here)
        hint = "FROBOZZ_HUB_TOKEN" if source is not None and source.name == "ENVIRONMENT" else "--token"
        raise typer.BadParameter(
            f"the hub's bearer token must be at least {MIN_TOKEN_CHARS} characters", param_hint=hint
        )
    return value


def serve(
    name: str = typer.Argument(
        ..., help=f"The server: {', '.join(SERVERS)}, 'all' (with --http), or 'agent' (the agent service, over HTTP)."
    ),
    http: bool = typer.Option(False, "--http", help="Serve over streamable HTTP instead of stdio."),
    host: str = typer.Option("127.0.0.1", help="The address to listen on (with --http)."),
    port: int = typer.Option(
        None,
        min=1,
        max=65535,
        show_default=False,
        help="The port to listen on (with --http): 8765, or 8771 for the agent.",
    ),
    workspaces: Path | None = typer.Option(
        None,
        envvar="FROBOZZ_AGENT_WORKSPACES",
        show_default=False,
        help="The agent's workspaces root (ROOT/<user>/<name>); with 'all', the agent is mounted at /agent.",
    ),
    platform_dir: Path | None = typer.Option(
        None,
        envvar="FROBOZZ_AGENT_PLATFORM_DIR",
        show_default=False,
        help="MCP servers (.mcp.json) and skills every workspace gets.",
    ),
    idle_timeout: float | None = typer.Option(
        None,
        envvar="FROBOZZ_AGENT_IDLE_TIMEOUT",
        min=0.1,
        show_default="600",
        help="Seconds an agent session's claude may idle before it is released.",
    ),
    max_live: int | None = typer.Option(
        None, envvar="FROBOZZ_AGENT_MAX_LIVE", min=1, show_default="8", help="claude processes the agent runs at once."
    ),
    model: str | None = typer.Option(
        None,
        envvar="FROBOZZ_AGENT_CLAUDE_MODEL",
        show_default=False,
        help="The agent's claude model (a session's own `model` wins); "
        "`scripted` runs offline on the project's scripted model.",
    ),
    token: str | None = typer.Option(
        None,
        envvar="FROBOZZ_HUB_TOKEN",
        callback=_token_given,
        show_default=False,
        help="The bearer token clients must send; generated when unset.",
    ),
    tokens: Path | None = typer.Option(
        None,
        envvar="FROBOZZ_HUB_TOKENS",
        show_default=False,
        help=(
            "A TOML file of scoped tokens (each: a name, its servers, the namespaces it may read and write; "
            "`frobozz hub-token` makes one), instead of the one token."
        ),
    ),
    trace: bool = trace_option(),
) -> None:
    """Run an MCP server over stdio (as `claude --mcp-config` launches it), every server over HTTP, or the
    agent service."""
    start_tracing(trace, f"frobozz-{name}")
    if name in ("agent", "all"):  # what the variables left unset may have in a .env file, as the other settings
        workspaces, platform_dir, model = _from_dotenv(workspaces, platform_dir, model)
    served = name == "agent" or (name == "all" and workspaces is not None)
    with _agent_model(model if served else None) as env:
        server = Server()
        agent = _agent_app(workspaces, platform_dir, idle_timeout, max_live, model, env, server) if served else None
        if served and model != "scripted":
            _warn_unless_logged_in()
        if name == "agent":
            _serve_agent(agent, host, port or 8771, token, tokens, server)
            return
        _serve_hub(name, http, host, port, token, tokens, agent, server)


def _from_dotenv(
    workspaces: Path | None, platform_dir: Path | None, model: str | None
) -> tuple[Path | None, Path | None, str | None]:
    """typer reads the options' variables from the environment only: a .env file's FROBOZZ_AGENT_WORKSPACES,
    _PLATFORM_DIR and _CLAUDE_MODEL (read as AgentSettings reads them; the rest of them AgentSettings reads
    itself) count where the option and its variable are unset."""
    from pydantic_settings import BaseSettings

    from frobozz.agent import AgentSettings

    class AgentSettingsOptions(BaseSettings):  # (only these: `serve all` without the agent checks no other)
        model_config = AgentSettings.model_config
        workspaces: Path | None = None
        platform_dir: Path | None = None
        claude_model: str | None = None

    given = AgentSettingsOptions()
    return workspaces or given.workspaces, platform_dir or given.platform_dir, model or given.claude_model


def _flush_when_claude_stops() -> None:
    """claude stops a stdio MCP server with SIGINT, SIGTERM 100 ms later and SIGKILL 400 ms after that: the
    server's last spans leave at the SIGINT, as a loaded machine may not send them in those 400 ms."""
    from frobozz.tracing import current

    tracing = current()
    if tracing is not None:
        tracing.flush_on(signal.SIGINT)


def _serve_hub(
    name: str,
    http: bool,
    host: str,
    port: int | None,
    token: str | None,
    tokens: Path | None,
    agent: Any,
    server: Server,
) -> None:
    port = port or 8765
    names = list(SERVERS) if name == "all" else [name]
    if any(n not in SERVERS for n in names):
        raise typer.BadParameter(f"no server {name!r}; known: {', '.join(SERVERS)}, all", param_hint="NAME")
    if not http:
        if name == "all":
            raise typer.BadParameter(
                "'all' needs --http: over stdio a client starts each server itself", param_hint="NAME"
            )
        _flush_when_claude_stops()
        load_server(name).run("stdio")
        return
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from frobozz.servers import hub_app
    from frobozz.web import create_app

    base = f"http://{host}:{port}"
    site = create_app(agent_served=agent is not None) if name == "all" else None
    grants, token, generated, notes = _tokens(token, tokens)
    try:
        mounts = {}
        if name == "all":  # the plugin's hooks (`frobozz plugin install --hub`)
            from frobozz.plugin import hook_app

            mounts["plugin"] = hook_app()
        if agent:  # last: what is unwound after its own failure closes undisturbed (hub_app)
            mounts["agent"] = agent
        app = hub_app(names, token, host=host, grants=grants, site=site, mounts=mounts or None)
    except (ValidationError, SettingsError):
        raise  # a setting's (FROBOZZ_…), said as its variable (_app._settings_error): it was blamed on --token
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--token") from e
    if token is not None:
        notes.append(
            f"claude: claude mcp add --transport http {names[0]} {base}/{names[0]}/mcp --header "
            f'"Authorization: Bearer {token if generated else "$FROBOZZ_HUB_TOKEN"}"'
        )
        if len(names) > 1:
            given = f" --token {token}" if generated else ""  # (else claude reads $FROBOZZ_HUB_TOKEN as it starts)
            notes.append(
                f"all of them: frobozz mcp-config --url {base}{given} -o hub.json; claude --mcp-config hub.json"
            )
    if site is not None:
        notes.append(f"web view: {_link(base, token, generated)}")
    if agent is not None:
        notes.append(f"agent service: {base}/agent/sessions")
    said = _postgres_note()
    notes.extend(said)
    headline = f"[bold]frobozz hub[/] on {base}: " + ", ".join(f"{base}/{n}/mcp" for n in names)
    _collect_less()
    try:
        server.run(app, host, port, bound=lambda: _announce(headline, notes))
    finally:
        if not said:  # not running as it started: said now if its servers have started it (or taken it up) since
            for note in _postgres_note(used_here=True):
                err.print(note, markup=False, highlight=False, soft_wrap=True)


def _collect_less() -> None:
    """Under 32 clients the hub's garbage collector stopped its event loop for 1.8 s in 20 (every request in
    flight waits), most of it in three full collections of 350 ms each (on a busy machine), which walked every
    object the imports made (bench/cortex_load.py --timeline). Frozen, those are left out of every collection;
    with a larger first threshold, the second and third generations are reached seldom: 0.35-0.65 s in 20, no full
    collection. Cycles are still collected."""
    gc.collect()  # what is garbage already is not frozen
    gc.freeze()
    gc.set_threshold(7000, 10, 10)


@contextmanager
def _agent_model(model: str | None) -> Iterator[dict[str, str]]:
    """The environment the agent's claude runs in: with `scripted`, the project's scripted model on a loopback
    port (offline, no login needed) for as long as the service runs."""
    if model != "scripted":
        yield {}
        return
    from frobozz.engine.scripted import ScriptedModel

    from ._chat import scripted_reply

    with ScriptedModel(scripted_reply) as scripted:
        yield scripted.env()


def _warn_unless_logged_in() -> None:
    """The service starts all the same (claude may be logged in later), but every turn would fail: say so."""
    from frobozz.runner import claude_readiness

    problem = claude_readiness()
    if problem:
        err.print(f"[yellow]warning:[/] {escape(problem.replace('--player walkthrough', '--model scripted'))}")


def _agent_app(
    workspaces: Path | None,
    platform_dir: Path | None,
    idle_timeout: float | None,
    max_live: int | None,
    model: str | None = None,
    env: dict[str, str] | None = None,
    server: Server | None = None,
) -> Any:
    from frobozz.agent import Agent, AgentError, AgentSettings, create_app
    from frobozz.engine import EngineOptions

    if workspaces is None:
        raise typer.BadParameter(
            "the agent service needs --workspaces ROOT (a workspace is ROOT/<user>/<name>)", param_hint="--workspaces"
        )
    if platform_dir is not None and not platform_dir.is_dir():
        raise typer.BadParameter(f"{platform_dir} is not a folder", param_hint="--platform-dir")
    there = next((folder for folder in (workspaces, *workspaces.parents) if folder.exists()), None)
    if there is not None and not there.is_dir():  # (a file: "chmod o+x" was advised, then mkdir failed)
        raise typer.BadParameter(f"{there} is not a folder", param_hint="--workspaces")
    claude_model = None if model == "scripted" else model
    given: dict[str, Any] = {"idle_timeout": idle_timeout, "max_live": max_live}  # unset: AgentSettings' (.env's)
    settings = AgentSettings(  # every FROBOZZ_AGENT_* checked here, before anything is made (a bad one: said, exit 1)
        workspaces=workspaces,
        platform_dir=platform_dir,
        claude_model=claude_model,
        **{name: value for name, value in given.items() if value is not None},
    )
    try:
        agent = Agent(
            settings,
            engine_options=EngineOptions(model=claude_model, env=env or {}),
            memory_servers=_memory_servers(),
        )
        agent.workspaces.owners.check_reachable()
    except AgentError as e:  # a root the accounts claude runs as cannot reach
        raise typer.BadParameter(str(e), param_hint="--workspaces") from None
    made = [folder for folder in (workspaces, *workspaces.parents) if not folder.exists()]
    workspaces.mkdir(parents=True, exist_ok=True)  # (once it is known to be a root that serves)
    if agent.workspaces.owners.active:
        for folder in made:  # passable by the accounts claude runs as, whatever the umask (077 made them root's)
            folder.chmod(0o711)
    return create_app(
        agent,
        on_failure=(lambda e: server.stop_on(f"the agent service has stopped: {type(e).__name__}: {e}"))
        if server is not None
        else None,
    )


def _memory_servers() -> Any:
    """cortex for sessions with memory, storing into their namespace. Not when the service is root: claude then
    runs as each workspace's owner, and cortex's environment holds the database's password, every user's memory."""
    from frobozz.servers import config_for

    if os.geteuid() == 0:
        return None

    def servers(namespace: str) -> dict[str, Any]:
        config = config_for(["cortex"])["mcpServers"]
        config["cortex"]["env"]["FROBOZZ_CORTEX_DEFAULT_NAMESPACE"] = namespace
        return config

    return servers


def _serve_agent(agent: Any, host: str, port: int, token: str | None, tokens: Path | None, server: Server) -> None:
    from frobozz.memory import stop_embedded_at_exit
    from frobozz.servers import BearerToken, ScopedTokens

    stop_embedded_at_exit()
    grants, token, _, notes = _tokens(token, tokens)
    try:
        app = (
            ScopedTokens(agent, grants, frozenset(), only="agent")
            if grants is not None
            else BearerToken(agent, token or "")
        )
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--token") from e
    server.run(
        app, host, port, bound=lambda: _announce(f"[bold]frobozz agent[/] on http://{host}:{port}/sessions", notes)
    )


def web(
    host: str = typer.Option("127.0.0.1", help="The address to listen on."),
    port: int = typer.Option(8770, min=1, max=65535, help="The port to listen on."),
    token: str | None = typer.Option(
        None,
        envvar="FROBOZZ_HUB_TOKEN",
        callback=_token_given,
        show_default=False,
        help="The token the browser must give; generated when unset.",
    ),
    tokens: Path | None = typer.Option(
        None,
        envvar="FROBOZZ_HUB_TOKENS",
        show_default=False,
        help=(
            "A TOML file of scoped tokens (`frobozz hub-token --server web`): each sees the memory namespaces "
            "it may read, and may forget only where it may write."
        ),
    ),
) -> None:
    """Serve the web view alone: runs (live and past) and memory in the browser (`serve all --http` serves it
    too, at /, beside the MCP servers)."""
    from frobozz.memory import stop_embedded_at_exit
    from frobozz.servers import BearerToken, ScopedTokens
    from frobozz.web import create_app

    stop_embedded_at_exit()  # an embedded Postgres it starts goes with it, even when it is killed with -9
    base = f"http://{host}:{port}"
    grants, token, generated, notes = _tokens(token, tokens)
    try:
        app = (
            ScopedTokens(create_app(agent_served=False), grants, frozenset())
            if grants is not None
            else BearerToken(create_app(agent_served=False), token or "")
        )
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--token") from e
    headline = f"[bold]frobozz web[/] on {base}: {_link(base, token, generated)}"
    Server().run(app, host, port, bound=lambda: _announce(headline, notes))


def _tokens(token: str | None, tokens: Path | None) -> tuple[list | None, str | None, bool, list[str]]:
    """Scoped grants from `tokens`, or the one token (generated when unset, and then said so), and what to
    tell the user."""
    from frobozz.servers import new_token

    if tokens is not None:
        from frobozz.servers import load_grants

        try:
            grants = load_grants(tokens)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--tokens") from e
        return grants, None, False, [f"scoped tokens from {tokens}: " + ", ".join(g.name for g in grants)]
    if token is not None:
        return None, token, False, []
    token = new_token()
    return None, token, True, [f"bearer token (generated; set FROBOZZ_HUB_TOKEN to keep one): {token}"]


def _postgres_note(*, used_here: bool = False) -> list[str]:
    """The embedded Postgres the hub's servers use stays running after it (for claude's servers, runs and the
    next start): say so, and what stops it, when it runs (`used_here`: and this process is among its users). The
    hub starts it only once a server needs it: one that is not running as the hub starts is said at its end, if
    it has started it by then (it was said running though it never started, and `database stop` found none)."""
    import os

    from frobozz.memory import MemorySettings, embedded_note, embedded_users

    settings = MemorySettings()
    note = embedded_note(settings)
    users = embedded_users(settings) if note else None
    if users is None or (used_here and os.getpid() not in users):
        return []
    return [f"note: {note}"]


def _link(base: str, token: str | None, generated: bool) -> str:
    """The web view's address; with a generated token, one that signs the browser in."""
    return f"{base}/?token={token}" if generated else f"{base}/"


def _announce(headline: str, notes: list[str]) -> None:
    say = err.print  # whole lines: the token must be copyable
    say(headline)
    for note in notes:
        say(note, highlight=False)
    sys.stderr.flush()


def hub_token(
    name: str = typer.Argument(..., help="Who the token is for (shown in refusals)."),
    servers: list[str] = typer.Option(
        ["cortex", "handoff"], "--server", help="A server it may use ('web': the web view; '*': any)."
    ),
    read: list[str] = typer.Option([], "--read", help="A namespace it may read ('*': any)."),
    write: list[str] = typer.Option([], "--write", help="A namespace it may write (and read)."),
    users: list[str] = typer.Option(
        [], "--user", help="With --server agent: a user whose workspaces it may use ('*': any)."
    ),
) -> None:
    """Make a scoped token: the token goes to its holder (shown once, here), the entry to FROBOZZ_HUB_TOKENS."""
    from pydantic import ValidationError

    from frobozz.servers import Grant, hashed, new_token

    parts = [*SERVERS, "web", "agent", "plugin", "*"]  # what a hub serves: its MCP servers and its mounts
    if unknown := [s for s in servers if s not in parts]:
        raise typer.BadParameter(
            f"no part {unknown[0][:40]!r} to grant; known: {', '.join(parts)}", param_hint="--server"
        )
    if users and not {"agent", "*"} & set(servers):  # (a grant's users are only the agent service's to read)
        raise typer.BadParameter("a user's workspaces are the agent service's: add --server agent", param_hint="--user")
    secret = new_token()
    try:
        grant = Grant(name=name, sha256=hashed(secret), servers=servers, read=read, write=write, users=users)
    except ValidationError as e:
        raise typer.BadParameter("; ".join(f"{problem['loc'][0]}: {problem['msg']}" for problem in e.errors())) from e
    err.print(f"token for {name} (give it to them; it is not kept anywhere): {secret}", markup=False)
    lists = {k: ", ".join(f'"{v}"' for v in getattr(grant, k)) for k in ("servers", "read", "write", "users")}
    print(
        f'[[token]]\nname = "{grant.name}"\nsha256 = "{grant.sha256}"\nservers = [{lists["servers"]}]\n'
        f"read = [{lists['read']}]\nwrite = [{lists['write']}]" + (f"\nusers = [{lists['users']}]" if users else "")
    )
