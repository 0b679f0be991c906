"""Open the course in JupyterLab (`make lab`): the whole repository served, the start page open.

Usage: python tools/lab.py [JupyterLab flags ...]

Runs ``jupyter lab`` with the repository root as the server's root directory, so the file
browser holds the whole course (README.md, notebooks/, solutions/, data/), and the start
page as its default URL: the browser JupyterLab opens, the URLs it prints and the server's
``/`` all lead to ``notebooks/00_start_here.ipynb``. Once the server answers, this prints
one line to click: the start page with the file browser at the repository root and the
server's token:

    Open the course: http://127.0.0.1:8888/lab/tree/notebooks/00_start_here.ipynb?file-brow…

Every argument is passed on to JupyterLab after these two, so a flag given here wins
(``make lab LAB_ARGS="--allow-root --ip=0.0.0.0 --no-browser"`` in a container). The port,
token and address are the server's own, read from the file it writes when it starts
(``jpserver-<pid>.json`` in Jupyter's runtime directory). The exit code is JupyterLab's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_PAGE = "notebooks/00_start_here.ipynb"
DEFAULT_URL = f"/lab/tree/{START_PAGE}"
PREFIX = "Open the course:"
# addresses a browser on this machine reaches as 127.0.0.1 (a port published from a container
# is reached the same way on its host)
LOOPBACK_OR_ANY = {"", "localhost", "127.0.0.1", "0.0.0.0", "::"}


def command(args: Sequence[str] = ()) -> list[str]:
    """The ``jupyter lab`` command line: the repository root, the start page, then ``args``."""
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={ROOT}",
            f"--LabApp.default_url={DEFAULT_URL}", *args]


def server_url(info: Mapping) -> str:
    """The server's address as a browser on this machine reaches it, ending in '/'."""
    host = str(info.get("hostname") or "")
    host = "127.0.0.1" if host in LOOPBACK_OR_ANY else f"[{host}]" if ":" in host else host
    scheme = "https" if info.get("secure") else "http"
    base = "/" + str(info.get("base_url") or "/").strip("/")
    return f"{scheme}://{host}:{info['port']}{base.rstrip('/')}/"


def course_url(info: Mapping) -> str:
    """The start page, the file browser at the repository root, and the server's token.

    Without ``file-browser-path`` JupyterLab shows the folder of the file it opens
    (notebooks/). It is not in the default URL because the server appends its own
    ``?token=`` to that when it prints it, which a second query would break."""
    query = {"file-browser-path": "/"}
    if info.get("token"):
        query["token"] = info["token"]
    return (server_url(info) + DEFAULT_URL.lstrip("/") + "?"
            + urllib.parse.urlencode(query, safe="/"))


def answers(info: Mapping, timeout: float = 2.0) -> bool:
    """True once the server answers HTTP (any status: a 403 is an answer too)."""
    request = urllib.request.Request(server_url(info) + "api/status")
    if info.get("token"):
        request.add_header("Authorization", f"token {info['token']}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        opener.open(request, timeout=timeout).close()
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
    return True


def runtime_dir() -> Path:
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir())


def wait_for_server(process: subprocess.Popen, runtime: Path,
                    poll: float = 0.2) -> dict | None:
    """The server's info once it answers, or None if it exited first."""
    info_file = runtime / f"jpserver-{process.pid}.json"
    while process.poll() is None:
        try:
            info = json.loads(info_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # not written yet, or being written
            info = None
        if info and (info.get("sock") or info.get("secure") or answers(info)):
            return info
        time.sleep(poll)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    runtime = runtime_dir()
    process = subprocess.Popen(command(args), cwd=ROOT)

    def forward(signum, _frame):
        # Ctrl-C reaches JupyterLab by itself (same process group) and it asks before
        # stopping; a SIGTERM or SIGHUP sent to this launcher alone is passed on.
        if signum != signal.SIGINT and process.poll() is None:
            process.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    info = wait_for_server(process, runtime)
    if info is not None:
        if info.get("sock"):
            line = f"{PREFIX} {DEFAULT_URL} on the UNIX socket {info['sock']}"
        else:
            line = f"{PREFIX} {course_url(info)}"
        print(f"\n    {line}\n", flush=True)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:  # pragma: no cover - the handler above takes SIGINT
            continue


if __name__ == "__main__":
    sys.exit(main())
