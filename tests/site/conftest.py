"""Fixtures for the website and slide-deck tests: the built site, a local server, Chromium.

The site and the decks are built once per test session into ``build/`` (the same code as
`make html` / `make slides`). The browser is Debian's Chromium driven by Playwright: this
environment cannot download Playwright's own browser builds, so it is launched by path.
Without Chromium the browser tests are skipped with the command that installs it.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
SCREENSHOTS = BUILD / "screenshots"
INSTALL_CHROMIUM = "apt-get install -y chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic",
                 # no host name resolves but this machine's: a stray request fails fast
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"]


def load_tool(name: str):
    """Import ``tools/<name>.py`` (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def site() -> Path:
    """The course website, built from the committed notebooks into build/."""
    load_tool("build_site").build(BUILD)
    return BUILD


@pytest.fixture(scope="session")
def decks() -> Path:
    """Every chapter's offline deck under build/slides/."""
    build_decks = load_tool("build_decks")
    if not (build_decks.REVEAL_PACKAGE / "dist" / "reveal.js").exists():
        pytest.skip("reveal.js is not installed: npm ci --prefix tools/reveal "
                    "(`make test` and `make slides` run it)")
    out = BUILD / "slides"
    out.mkdir(parents=True, exist_ok=True)
    build_decks.copy_reveal(out)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        build_decks.export(notebook, out)
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def server(site):
    """``python -m http.server`` on 127.0.0.1 serving build/; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    if path is None:
        pytest.skip(f"Chromium is not installed: {INSTALL_CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Visit:
    """One browser tab that records what a page did: console errors, uncaught exceptions,
    failed requests and every request for another host (which cannot resolve: see
    CHROMIUM_ARGS). Requests are watched, not intercepted, so pages load at full speed."""

    def __init__(self, context, local_hosts: set[str]):
        self.page = context.new_page()
        self.errors: list[str] = []
        self.remote: list[str] = []
        self.local_hosts = local_hosts
        self.page.on("request", self._request)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("requestfailed", lambda r: self.errors.append(
            f"request failed: {r.url} ({r.failure})"))

    def _request(self, request):
        url = urlsplit(request.url)
        if url.scheme not in {"file", "data", "blob", "about"} \
                and url.hostname not in self.local_hosts:
            self.remote.append(request.url)

    def _console(self, message):
        if message.type == "error":
            self.errors.append(f"console: {message.text}")

    def open(self, url: str):
        response = self.page.goto(url, wait_until="load")
        assert response is None or response.ok, f"{url}: HTTP {response.status}"
        return self.page

    def broken_images(self) -> list[str]:
        return self.page.eval_on_selector_all(
            "img", "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0))"
                   ".map(i => i.getAttribute('src'))")

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        target = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(target))
        return target

    def assert_clean(self):
        assert self.remote == [], f"requests left the machine: {self.remote}"
        assert self.errors == [], "\n".join(self.errors)


@pytest.fixture(scope="session")
def browser_context(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context
    context.close()


@pytest.fixture
def visit(browser_context, server):
    tab = Visit(browser_context, {"127.0.0.1", "localhost"})
    yield tab
    tab.page.close()
