"""A throwaway PostgreSQL server, started from the operating system's own binaries.

The tests, the benchmarks and chapter s12 need a *real* database server, not a fake: the
point is to watch a ``UNIQUE`` constraint, a transaction and row-level security do what a
file lock only simulates. :class:`LocalPostgres` makes one in a temporary directory with
``initdb``, starts it with ``pg_ctl`` listening on a Unix socket in that directory only
(no TCP port, so two of them never collide), and stops it and removes the directory at
the end. Nothing is installed and nothing outside the directory is touched.

PostgreSQL refuses to run as root, so when this process is root (a container, CI) the
server runs as the ``postgres`` account the package creates, and the directory is given
to it. Without the binaries, :func:`find_server_binaries` returns ``None`` and starting
raises :class:`PostgresUnavailableError` naming the install command.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from labmem.core.errors import LabmemError

__all__ = ["INSTALL_HINT", "LocalPostgres", "PostgresUnavailableError",
           "find_server_binaries"]

#: What to run when the server binaries are missing (Debian and Ubuntu).
INSTALL_HINT = "apt-get install -y postgresql"

#: The account the server runs as when this process is root.
SERVER_ACCOUNT = "postgres"


class PostgresUnavailableError(LabmemError):
    """No PostgreSQL server binaries here, or the throwaway server would not start."""


def find_server_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None``.

    ``LABMEM_PG_BIN`` wins; then ``pg_config --bindir`` style locations the packages use
    (``/usr/lib/postgresql/<version>/bin``, newest first); then ``PATH``.
    """
    candidates: list[Path] = []
    if os.environ.get("LABMEM_PG_BIN"):
        candidates.append(Path(os.environ["LABMEM_PG_BIN"]))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                      key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                      else 0, reverse=True)
    candidates += [Path(p) for p in versions]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


class LocalPostgres:
    """One PostgreSQL cluster in a temporary directory, reachable on a Unix socket.

    ::

        with LocalPostgres() as server:
            url = server.url                    # superuser, database "postgres"
            server.restart()                    # what a crash-free restart looks like

    ``url`` is a libpq URL (``postgresql://postgres@/postgres?host=<socket dir>&port=…``)
    that psycopg and ``psql`` both accept. Authentication is ``trust`` on the socket: the
    socket lives in a directory only this machine's processes can reach.
    """

    def __init__(self, *, port: int = 5432, bin_dir: Path | None = None,
                 fsync: bool = True) -> None:
        if not (isinstance(port, int) and 1 <= port <= 65535):
            raise PostgresUnavailableError(f"port: {port!r} is not a port number; use 1–65535")
        self.port = port
        # False: writes are not forced to the disk. Only an operating-system crash could
        # lose data (a server crash or restart loses nothing committed): what a test run
        # wants; a benchmark keeps the default.
        self.fsync = fsync
        self.bin_dir = bin_dir if bin_dir is not None else find_server_binaries()
        self.directory: Path | None = None
        self._running = False

    # -- paths and addresses --------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._dir() / "data"

    @property
    def socket_dir(self) -> Path:
        return self._dir() / "socket"

    @property
    def log_path(self) -> Path:
        return self._dir() / "server.log"

    def url_for(self, database: str = "postgres", user: str = "postgres") -> str:
        """A libpq URL for ``user`` on ``database`` over this server's socket."""
        return (f"postgresql://{user}@/{database}?host={self.socket_dir}"
                f"&port={self.port}")

    @property
    def url(self) -> str:
        """The superuser's URL on the ``postgres`` database."""
        return self.url_for()

    def _dir(self) -> Path:
        if self.directory is None:
            raise PostgresUnavailableError("the server has not been started; call start()")
        return self.directory

    # -- life cycle -----------------------------------------------------------------

    def start(self) -> LocalPostgres:
        """Create the cluster (first time only) and start the server; wait until it
        accepts connections."""
        if self._running:
            return self
        if self.bin_dir is None:
            raise PostgresUnavailableError(
                f"no PostgreSQL server binaries (initdb, pg_ctl) were found; install them "
                f"with `{INSTALL_HINT}`, or set LABMEM_PG_BIN to their directory")
        if self.directory is None:
            # short: a Unix socket's path must fit in 107 bytes
            self.directory = Path(tempfile.mkdtemp(prefix="lmpg-"))
            self.socket_dir.mkdir()
            self._give_to_server(self.directory, self.socket_dir)
            self._run("initdb", "-D", str(self.data_dir), "-U", "postgres",
                      "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions",
                      "--no-sync")  # a throwaway cluster: its files need no flush now
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_path), "-w",
                  "-t", "60", "-o", self._server_options(), "start")
        self._running = True
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions, then shut down
        cleanly; ``immediate``: what a crash looks like, recovered at the next start)."""
        if self._running:
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")
            self._running = False

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def close(self) -> None:
        """Stop the server and remove its directory."""
        try:
            self.stop()
        finally:
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)
                self.directory = None

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"LocalPostgres({state}, port={self.port})"

    # -- helpers --------------------------------------------------------------------

    def _server_options(self) -> str:
        # shared_buffers: PostgreSQL's own default (128MB). Less makes a 100k-record store
        # (about 100 MB of rows) re-read its pages from the OS on every recall.
        return (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
                f"-c port={self.port} -c max_connections=200 -c shared_buffers=128MB"
                f"{'' if self.fsync else ' -c fsync=off'}")

    @staticmethod
    def _as_server_account() -> dict:
        """``subprocess`` arguments that run a server binary as ``postgres`` when we are
        root (PostgreSQL refuses root), else as ourselves."""
        if os.geteuid() != 0:
            return {}
        try:
            account = pwd.getpwnam(SERVER_ACCOUNT)
        except KeyError:
            raise PostgresUnavailableError(
                f"running as root and there is no {SERVER_ACCOUNT!r} account for the "
                f"server; `{INSTALL_HINT}` creates it") from None
        return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def _give_to_server(self, *paths: Path) -> None:
        account = self._as_server_account()
        for path in paths:
            if account:
                os.chown(path, account["user"], account["group"])
            path.chmod(0o700)

    def _run(self, program: str, *args: str) -> None:
        assert self.bin_dir is not None
        done = subprocess.run([str(self.bin_dir / program), *args], capture_output=True,
                              text=True, cwd=self.directory, **self._as_server_account())
        if done.returncode != 0:
            log = ""
            if self.directory is not None and self.log_path.exists():
                log = self.log_path.read_text(errors="replace")[-2000:]
            raise PostgresUnavailableError(
                f"{program} failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-2000:]}{log and ' | log: ' + log}")
