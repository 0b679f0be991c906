"""Fixtures for the website and slide-deck tests: the built site, a local server, Chromium.

The site and the decks are built once per test session (the same code as `make html` /
`make slides`) into the session's temporary directory, not ``build/``: under pytest-xdist
every worker asks for them, the first to arrive builds them while holding a lock and the
others wait for it and reuse the result, and two test runs in one checkout (or a
`make html` beside a test run) never rewrite each other's files. Each worker serves them
with its own server and browser. Screenshots still go to ``build/screenshots/`` (one file
per test, so workers never write the same one).

The browser is Debian's Chromium driven by Playwright: this environment cannot download
Playwright's own browser builds, so it is launched by path. Without Chromium the browser
tests are skipped with the command that installs it.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
SCREENSHOTS = BUILD / "screenshots"  # kept for review after the run (the builds are not)
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


try:
    import fcntl
except ImportError:  # Windows: no flock; each worker then builds into its own directory
    fcntl = None


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold ``lock`` against every other process of this test session (xdist's workers)."""
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_once(tmp_path_factory: pytest.TempPathFactory, name: str,
                make: Callable[[Path], None]) -> Path:
    """``make(<dir>/<name>)`` once per test session and return that path.

    ``<dir>`` is shared by every process of the session: under pytest-xdist the parent of
    each worker's base temporary directory (``pytest-N/`` above ``pytest-N/popen-gw0/``).
    Whichever worker comes first builds while holding a lock; the others wait for it and
    reuse the result. A build that fails is tried again by the next worker, which then
    reports the same failure.
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER") and fcntl is not None:
        shared = shared.parent
    out, tag = shared / name, name.replace("/", "-")
    done = shared / f"{tag}.done"
    with _exclusive(shared / f"{tag}.lock") if fcntl else contextlib.nullcontext():
        if not done.exists():
            make(out)
            done.touch()
    return out


def _build_site(out: Path) -> None:
    load_tool("build_site").build(out)


def _build_decks(out: Path) -> None:
    build_decks = load_tool("build_decks")
    out.mkdir(parents=True, exist_ok=True)
    build_decks.copy_reveal(out)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted(
            (ROOT / "notebooks" / "zh").glob("*.ipynb")):
        build_decks.export(notebook, out)


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The course website, built from the committed notebooks (``make html``)."""
    return _build_once(tmp_path_factory, "build", _build_site)


@pytest.fixture(scope="session")
def decks(tmp_path_factory) -> Path:
    """Every chapter's offline deck, in ``slides/`` beside the site (``make slides``), so
    the site's server serves them too."""
    if not (load_tool("build_decks").REVEAL_PACKAGE / "dist" / "reveal.js").exists():
        pytest.skip("reveal.js is not installed: npm ci --prefix tools/reveal "
                    "(`make test` and `make slides` run it)")
    return _build_once(tmp_path_factory, "build/slides", _build_decks)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def server(site):
    """``python -m http.server`` on 127.0.0.1 serving the site (and ``slides/``), one per
    worker on a port of its own; yields its base URL."""
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
    CHROMIUM_ARGS). Requests are watched, not intercepted, so pages load at full speed.

    The tab is reused from test to test (:meth:`reset` between them): a new tab starts a
    new renderer that compiles the theme's scripts again, about twice the browser's work per
    page. Every test still opens its page afresh in its own document, and records only what
    happened after its reset; the context (cache, storage) was always one per session.
    """

    def __init__(self, context, local_hosts: set[str]):
        self.context = context
        self.errors: list[str] = []
        self.remote: list[str] = []
        self.local_hosts = local_hosts
        self._new_page()

    def _new_page(self):
        self.page = self.context.new_page()
        self.page.on("request", self._request)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("requestfailed", lambda r: self.errors.append(
            f"request failed: {r.url} ({r.failure})"))

    def reset(self):
        """Leave the last test's page for a blank one (what that page still had in flight
        is cancelled there, not reported in the next test) and forget what it recorded; a
        tab that was closed or cannot leave its page is replaced by a new one."""
        from playwright.sync_api import Error

        if not self.page.is_closed():
            try:
                self.page.goto("about:blank")
            except Error:
                self.page.close()
        if self.page.is_closed():
            self._new_page()
        self.errors.clear()
        self.remote.clear()

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

    def search(self, url: str) -> list[str]:
        """Open a search page (``…/search.html?q=word``) and return the pages it lists."""
        self.open(url)
        results = self.page.locator("#search-results ul.search li a")
        results.first.wait_for(timeout=10_000)
        return [h.split("?")[0].split("#")[0] for h in results.evaluate_all(
            "links => links.map(a => a.getAttribute('href'))")]

    def first_figure_slide(self, url: str):
        """Open a deck, move it to its first slide with a figure and return that image."""
        tab = self.open(url)
        tab.wait_for_function("() => window.Reveal && Reveal.isReady()")
        tab.evaluate("""() => {
            const slide = Reveal.getSlides().find(s => s.querySelector("img"));
            const at = Reveal.getIndices(slide); Reveal.slide(at.h, at.v); }""")
        image = tab.locator(".reveal section.present img").first
        assert image.evaluate("i => i.naturalWidth") > 0
        return image

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


@pytest.fixture(scope="session")
def _tab(browser_context):
    tab = Visit(browser_context, {"127.0.0.1", "localhost"})
    yield tab
    tab.page.close()


@pytest.fixture
def visit(_tab, server):
    """The session's tab, blank and with nothing recorded, for one test."""
    _tab.reset()
    yield _tab
    _tab.reset()
