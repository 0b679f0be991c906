"""`make lab` (tools/lab.py): the whole repository served, the start page opened, one line to
click. The last test starts the real server (a few seconds) and follows the printed line."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from labmem.notebook import START_PAGE

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("lab_launcher", ROOT / "tools" / "lab.py")
lab = importlib.util.module_from_spec(_spec)  # tools/lab.py (tools/ is not a package)
_spec.loader.exec_module(lab)

STARTUP_SECONDS = 90  # a loaded CI machine; it takes about 5 s


def test_the_server_root_is_the_repository_and_its_default_url_the_start_page():
    command = lab.command(["--allow-root", "--ip=0.0.0.0", "--no-browser"])
    assert command[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={ROOT}" in command
    assert "--LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb" in command
    assert command[-3:] == ["--allow-root", "--ip=0.0.0.0", "--no-browser"], "LAB_ARGS last"
    assert lab.START_PAGE == f"notebooks/{START_PAGE}"
    assert (ROOT / lab.START_PAGE).is_file()


@pytest.mark.parametrize(("info", "url"), [
    ({"hostname": "localhost", "port": 8888, "base_url": "/", "token": "abc"},
     "http://127.0.0.1:8888/lab/tree/notebooks/00_start_here.ipynb"
     "?file-browser-path=/&token=abc"),
    # --ip=0.0.0.0 in a container: the published port is reached as 127.0.0.1 on the host
    ({"hostname": "0.0.0.0", "port": 8889, "base_url": "/", "token": "abc"},
     "http://127.0.0.1:8889/lab/tree/notebooks/00_start_here.ipynb"
     "?file-browser-path=/&token=abc"),
    ({"hostname": "10.1.2.3", "port": 9000, "base_url": "/course/", "token": "",
      "secure": True},
     "https://10.1.2.3:9000/course/lab/tree/notebooks/00_start_here.ipynb"
     "?file-browser-path=/"),
    ({"hostname": "fe80::1", "port": 8888, "base_url": "/", "token": "t"},
     "http://[fe80::1]:8888/lab/tree/notebooks/00_start_here.ipynb"
     "?file-browser-path=/&token=t"),
])
def test_the_printed_url_opens_the_start_page_with_the_token(info, url):
    assert lab.course_url(info) == url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_line_with(process: subprocess.Popen, text: str, seconds: float) -> str:
    """The first line of the process' stdout that holds ``text`` (read unbuffered)."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline, seen = time.monotonic() + seconds, b""
    while time.monotonic() < deadline:
        if selector.select(timeout=0.5):
            chunk = os.read(process.stdout.fileno(), 65536)
            seen += chunk
            for line in seen.decode(errors="replace").splitlines():
                if text in line:
                    return line
            if not chunk and process.poll() is not None:
                break
    raise AssertionError(f"no line with {text!r} in {seconds} s (exit {process.poll()}): "
                         f"{seen[-2000:]!r}")


def _get(url: str, token: str) -> tuple[int, bytes, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with opener.open(request, timeout=30) as response:
        return response.status, response.read(), response.geturl()


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="stops the server's process group")
def test_make_lab_serves_the_course_and_prints_the_start_page(tmp_path):
    pytest.importorskip("jupyterlab")
    args = ["--no-browser", "--ip=127.0.0.1", f"--port={_free_port()}"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        args.append("--allow-root")
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    with open(tmp_path / "server.log", "w") as log:
        process = subprocess.Popen([sys.executable, str(ROOT / "tools" / "lab.py"), *args],
                                   stdout=subprocess.PIPE, stderr=log, env=env,
                                   start_new_session=True)
    try:
        line = _read_line_with(process, lab.PREFIX, STARTUP_SECONDS)
        url = line.split(lab.PREFIX, 1)[1].strip()
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query)
        assert parts.path == "/lab/tree/notebooks/00_start_here.ipynb"
        assert query["file-browser-path"] == ["/"] and query["token"][0]
        token = query["token"][0]
        base = f"{parts.scheme}://{parts.netloc}/"

        status, page, _ = _get(url, token)  # the page a browser gets for the printed line
        assert status == 200 and b"JupyterLab" in page
        (config,) = re.findall(rb'<script id="jupyter-config-data"[^>]*>(.*?)</script>', page,
                               re.DOTALL)
        assert json.loads(config)["treePath"] == "notebooks/00_start_here.ipynb"

        status, body, _ = _get(base + "api/contents/notebooks/00_start_here.ipynb?content=0",
                               token)
        assert status == 200 and json.loads(body)["type"] == "notebook"
        status, body, _ = _get(base + "api/contents?content=1", token)
        names = {item["name"] for item in json.loads(body)["content"]}
        assert {"README.md", "notebooks", "solutions", "data"} <= names
        # the server's own `/` (and the URLs it logs) lead to the start page too
        assert _get(base, token)[2].startswith(base + "lab/tree/notebooks/00_start_here.ipynb")
    finally:
        process.send_signal(signal.SIGTERM)  # the launcher passes it on to the server
        try:
            assert process.wait(timeout=30) is not None
        finally:
            if process.poll() is None or _group_alive(process.pid):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            process.stdout.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
