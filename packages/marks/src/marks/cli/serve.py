"""`marks serve`: the REST API and the web UI (see marks.server)."""

import sys
from pathlib import Path

import click

from marks.cli import Command, global_options, state


@click.command(cls=Command)
@global_options
@click.option("--host", default=None, help="Address to bind [config server_host, 127.0.0.1].")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port [8000].")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True),
    help="Read the API token from this file (instead of config api_token).",
)
@click.option("--name", "names", multiple=True, help="Another Host name to answer to.")
@click.option("--origin", "origins", multiple=True, help="A web origin allowed cross-origin.")
@click.option(
    "--access-log/--no-access-log",
    default=None,
    help="A line per request on stderr, in the combined log format [config server_access_log].",
)
def serve(
    host: str | None,
    port: int | None,
    token_file: str | None,
    names: tuple[str, ...],
    origins: tuple[str, ...],
    access_log: bool | None,
) -> None:
    """Run the REST API and the web UI (127.0.0.1:8000 by default).

    Each request is logged on stderr as web servers do (nginx's and Apache's combined format:
    client, time, request line, status, bytes, referrer, user agent); never a token or a body.
    """
    from marks import settings
    from marks.library import MarksError
    from marks.server import ServerSettings, make_app
    from marks.server.settings import is_loopback, new_token
    from servekit import Listener
    from servekit import serve as run

    config = state().config
    host = host or config["server_host"]
    port = config["server_port"] if port is None else port
    token = config["api_token"]
    if token_file:
        token = Path(token_file).read_text().strip()
        if not token:
            raise MarksError(f"{token_file} is empty")
    if not token:
        if not is_loopback(host):
            raise MarksError(
                f"refusing to listen on {host} without an API token "
                "(run `marks config token` or pass --token-file)"
            )
        token = settings.store_value("api_token", new_token())
    server = ServerSettings(
        db=state().db_path,
        host=host,
        port=port,
        token=token,
        names=(*config["server_names"], *names),
        origins=(*config["cors_origins"], *origins),
        config=config,
        access_log=config["server_access_log"] if access_log is None else access_log,
    )
    app = make_app(server)
    print(f"marks: library {server.db}", file=sys.stderr)
    print(f"marks: pairing token for the browser extension: {token}", file=sys.stderr, flush=True)
    listener = Listener(host, port)

    def ready(url: str) -> None:
        # No fetch of this process (a title on add, health, content) may reach this server.
        from urllib.parse import urlsplit

        from marks import webclient

        webclient.own_server(host, urlsplit(url).port or port)
        print(f"listening on {url}", file=sys.stderr, flush=True)

    run(app, listener, on_ready=ready)
