"""`make demo`: runs each product's main path on embedded defaults and shows what happens."""

import asyncio
import datetime as dt
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "tests"))

from support.jobclient import worker_key, write_allowlist  # noqa: E402
from support.servers import ServerProcess  # noqa: E402

JOB = """\
import platform, time
print("hello from", platform.python_implementation(), platform.python_version(), flush=True)
for step in range(3):
    print("working, step", step + 1, flush=True)
    time.sleep(0.2)
with open("result.txt", "w") as out:
    out.write("the answer is 42\\n")
print("wrote result.txt")
"""


def run(*argv: str, stdin: str | None = None) -> str:
    print(f"$ {' '.join(argv)}", flush=True)
    result = subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], input=stdin, capture_output=True, text=True
    )
    print(result.stdout + result.stderr, end="", flush=True)
    if result.returncode != 0:
        sys.exit(f"demo step failed: {' '.join(argv)}")
    return result.stdout


def job_tarball() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = JOB.encode()
        info = tarfile.TarInfo("main.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def follow(url: str) -> tuple[int, str]:
    async with websockets.connect(url) as socket:
        try:
            async for message in socket:
                print(f"  | {message}", end="", flush=True)
        except websockets.ConnectionClosed:
            pass
        return socket.close_code, socket.close_reason


def jobrunner_demo() -> None:
    print("== jobrunner ==")
    run("jobrunner", "--version")
    extra = []
    if os.geteuid() != 0:
        print("(not root: no sandbox here, so this demo runs jobs with --unsafe-no-sandbox)")
        extra = ["--unsafe-no-sandbox"]
    state = Path(tempfile.mkdtemp(prefix="jobrunner-demo-", dir="/tmp"))
    state.chmod(0o711)
    try:
        with ServerProcess(
            [str(BIN / "jobrunner"), "serve", "--port", "0", "--state-dir", str(state), *extra]
        ) as server:
            print(f"server started at {server.url}")
            with httpx.Client(base_url=server.url) as client:
                accepted = client.post(
                    "/submit",
                    data={"manifest": '{"entrypoint": "main.py"}'},
                    files={"files": ("job.tar.gz", job_tarball())},
                ).json()
                job = accepted["job_id"]
                print(f"submitted job {job} (queue position {accepted['position']})")
                print("live log over WebSocket:")
                ws = server.url.replace("http", "ws", 1) + f"/logs/{job}/stream"
                code, reason = asyncio.run(follow(ws))
                print(f"stream closed: {code} {reason}")
                record = client.get(f"/status/{job}").json()
                print("status record:")
                print(json.dumps(record, indent=2))
                print("outputs:", json.dumps(client.get(f"/outputs/{job}").json()["outputs"]))
                print("result.txt:", client.get(f"/download/{job}/result.txt").text, end="")
            run("jobrunner", "verify", "-", stdin=json.dumps(record))
            if record["status"] != "completed":
                sys.exit("demo job did not complete")
        print("server stopped")
        pool_demo(state, extra)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def pool_demo(state: Path, extra: list[str]) -> None:
    """Two workers and a trusted pool coordinator on loopback; jobs go through the pool."""
    print("\n-- a pool of two workers --")
    trust = ["--trusted-proxy", "127.0.0.1", "--concurrency", "1"]
    workers = [
        ServerProcess(
            [
                str(BIN / "jobrunner"),
                "serve",
                "--port",
                "0",
                "--state-dir",
                str(state / f"worker{n}"),
                *trust,
                *extra,
            ]
        )
        for n in (1, 2)
    ]
    try:
        allowlist = write_allowlist(
            state / "workers.toml", [(w.url, worker_key(w.url)) for w in workers]
        )
        print(allowlist.read_text(), end="")
        with ServerProcess(
            [
                str(BIN / "jobrunner"),
                "pool",
                "--workers",
                str(allowlist),
                "--port",
                "0",
                "--state-dir",
                str(state / "pool"),
                "--health-interval",
                "0.5",
            ]
        ) as pool:
            print(f"pool started at {pool.url}")
            project = state / "project"
            project.mkdir()
            (project / "main.py").write_text(JOB)
            for _ in range(2):
                run(
                    "jobrunner",
                    "submit",
                    str(project),
                    "--follow",
                    "--download",
                    str(state / "pool-results"),
                    "--server",
                    pool.url,
                )
            print("pool health:", httpx.get(f"{pool.url}/health").json()["status"])
    finally:
        for worker in workers:
            worker.stop()


def marks_demo() -> None:
    print("\n== marks ==")
    run("marks", "--version")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from netscape_gen import generate

    with tempfile.TemporaryDirectory(prefix="marks-demo-") as directory:
        folder = Path(directory)
        db = str(folder / "library.db")
        # Two browser exports: a hand-written one with real quirks, and 2,000 generated entries.
        generated = folder / "bookmarks.html"
        generated.write_text(generate(2000, seed=3))
        quirks = ROOT / "tests" / "marks" / "data" / "quirks.html"
        run("marks", "--db", db, "import", "html", str(quirks), "--verbose")
        run("marks", "--db", db, "import", "html", str(generated))
        run("marks", "--db", db, "bookmark", "search", "--fts", "rust book", "-n", "3")
        run("marks", "--db", db, "bookmark", "search", "--fts", "cafe", "-n", "3")
        run("marks", "--db", db, "bookmark", "search", "--fts", "#dev NOT #dev/web", "-n", "3")
        run("marks", "--db", db, "bookmark", "query", "visits > 0 and added < 2012", "-n", "3")
        tree = run_quiet("marks", "--db", db, "tag", "tree")
        print("$ marks tag tree | head -6\n" + "\n".join(tree.splitlines()[:6]))
        exported = folder / "export.html"
        run("marks", "--db", db, "export", "html", "--hierarchical", "--file", str(exported))
        print(f"{exported.name}: {exported.stat().st_size} bytes, first folder lines:")
        folders = [line for line in exported.read_text().splitlines() if "<H3>" in line]
        print("\n".join(folders[:4]))
        run("marks", "--db", db, "db", "stats")
        run(
            "marks",
            "--db",
            db,
            "shell",
            "-c",
            "ls; cd /tags/Dev; pwd; ls; which 2; cd 2; cat title; file; recent --limit 3",
        )
        browsers_demo(folder)


def browsers_demo(folder: Path) -> None:
    """Three browsers in a fake home: find their profiles, import them, relate the bookmarks."""
    from browser_gen import chrome_profile, firefox_profile
    from support.browserfiles import (
        safari_folder,
        safari_leaf,
        write_safari_bookmarks,
        write_safari_history,
    )

    home = folder / "home"
    chrome_profile(home / ".config/google-chrome/Default", 300, 600)
    firefox_profile(home / ".mozilla/firefox/demo.default-release", 200, 400)
    (home / ".mozilla/firefox/profiles.ini").write_text(
        "[Install4F96D1932A9F858E]\nDefault=demo.default-release\n\n"
        "[Profile0]\nName=default-release\nIsRelative=1\nPath=demo.default-release\n"
    )
    write_safari_bookmarks(
        home / "Library/Safari",
        [safari_folder("BookmarksBar", [safari_leaf("https://www.python.org/", "Python")])],
    )
    visits = [dt.datetime(2026, 11, day, tzinfo=dt.UTC) for day in (2, 9, 16)]
    write_safari_history(home / "Library/Safari", [("https://www.python.org/", "Python", visits)])
    db = str(folder / "browsers.db")
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(home)  # the browsers' files are found under the home directory
    try:
        run("marks", "--db", db, "browser", "list")
        run("marks", "--db", db, "browser", "import", "all", "--history")
        run("marks", "--db", db, "graph", "build")
        run("marks", "--db", db, "graph", "neighbors", "1", "--limit", "5")
        run("marks", "--db", db, "graph", "stats")
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


def marks_health_demo() -> None:
    """Link health and page content against a local web server (nothing leaves the machine)."""
    from support.websites import Websites

    print("\n== marks: link health and page content ==")
    with (
        Websites(hosts=2, slow_seconds=5) as web,
        tempfile.TemporaryDirectory(prefix="marks-health-") as directory,
    ):
        web.pages["whale"] = ("Whales", "The narwhal sings under the arctic ice.")
        db = str(Path(directory) / "marks.db")
        run("marks", "--db", db, "bookmark", "add", web.url("/page/whale"))
        for path in ("/redirect", "/status/404", "/challenge", "/slow"):
            run_quiet("marks", "--db", db, "bookmark", "add", web.url(path, 2), "--no-fetch")
        run_quiet("marks", "--db", db, "bookmark", "add", "http://gone.invalid/", "--no-fetch")
        run("marks", "--db", db, "bookmark", "health", "--verbose", "--timeout", "1")
        run("marks", "--db", db, "content", "refresh", "1")
        run("marks", "--db", db, "bookmark", "search", "--fts", "narwhal")
        run("marks", "--db", db, "shell", "-c", "ls /broken; stat /bookmarks/3")
        print("\n-- the reading queue --")
        run("marks", "--db", db, "queue", "add", "1", "2", "--priority", "1")
        run("marks", "--db", db, "queue", "add", "3")
        run("marks", "--db", db, "queue", "progress", "2", "40")
        run("marks", "--db", db, "queue", "next")
        run("marks", "--db", db, "queue", "stats")


def marks_serve_demo() -> None:
    """`marks serve` on a demo library: its URL, then a few API calls as curl would make them."""
    print("\n== marks serve ==")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from netscape_gen import generate

    with tempfile.TemporaryDirectory(prefix="marks-serve-demo-") as directory:
        folder = Path(directory)
        db = folder / "library.db"
        env = {"XDG_CONFIG_HOME": str(folder / "config"), "XDG_DATA_HOME": str(folder / "data")}
        source = folder / "bookmarks.html"
        source.write_text(generate(500, seed=5))
        subprocess.run(
            [str(BIN / "marks"), "--db", str(db), "import", "html", str(source)],
            check=True, env={**os.environ, **env}, capture_output=True,
        )  # fmt: skip
        argv = [str(BIN / "marks"), "--db", str(db), "serve", "--port", "0"]
        with ServerProcess(argv, env=env) as server, httpx.Client(base_url=server.url) as http:
            print(server.output.strip())
            print(f"web UI: {server.url}/   API document: {server.url}/openapi.json")

            def show(method: str, path: str, **kwargs) -> httpx.Response:
                response = http.request(method, path, **kwargs)
                body = response.text if len(response.text) < 400 else response.text[:400] + "..."
                print(f"$ curl -X {method} '{server.url}{path}'  -> {response.status_code}")
                print(f"  {body}")
                return response

            show("GET", "/bookmarks?limit=2&sort=title")
            show("GET", "/search?q=kernel&fts=1&limit=1")
            made = show(
                "POST", "/bookmarks", json={"url": "https://demo.example/", "tags": ["demo"]}
            )
            show("POST", "/bookmarks", json={"url": "https://DEMO.example"})  # 409: already there
            show("GET", "/bookmarks/lookup?url=https://demo.example")
            show("PATCH", f"/bookmarks/{made.json()['id']}", json={"starred": True})
            show("GET", "/tags/complete?prefix=de&limit=5")
            show("GET", "/bookmarks/by-date?granularity=year")
            show("GET", "/stats")
            show("GET", "/bookmarks", headers={"Host": "evil.example"})  # DNS-rebinding guard
        print("server stopped")


def run_quiet(*argv: str) -> str:
    result = subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, check=True
    )
    return result.stdout


def main() -> None:
    jobrunner_demo()
    marks_demo()
    marks_health_demo()
    marks_serve_demo()


if __name__ == "__main__":
    main()
