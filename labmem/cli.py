"""The ``labmem`` command: one entry point, one subcommand per capability.

Chapters add subcommands by adding a ``register`` function to :data:`COMMANDS`.
Every failure is one line on stderr and exit status 2: a ``LabmemError``, an operating
system error (``LABMEM_HOME`` naming a file, a directory that cannot be created, a file
that cannot be read) and a usage error alike — never a traceback. A reader that closes
the pipe early (``labmem recall … --json | head -1``) ends the command quietly, status 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from labmem.core.errors import InvalidInputError, LabmemError

EXIT_FAILURE = 2


def one_line(message: str) -> str:
    """``message`` on one line (a path or a stored value may hold a line break)."""
    return " ".join(message.splitlines()) or "failed"


def fail(message: str) -> int:
    """Print ``labmem: error: <message>`` as one line on stderr; return the exit status."""
    print(f"labmem: error: {one_line(message)}", file=sys.stderr)
    return EXIT_FAILURE


def describe_os_error(exc: OSError) -> str:
    """An ``OSError`` as "what failed: which path", with the hint when it is the home."""
    what = exc.strerror or type(exc).__name__
    path = exc.filename
    text = f"{what}: {path}" if path is not None else str(exc) or what
    home = os.environ.get("LABMEM_HOME")
    if home and path is not None and str(path).startswith(home):
        text += f" (under LABMEM_HOME={home}; point it at a directory labmem may write)"
    return text


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line too (``--help`` still prints the full usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_FAILURE, f"{self.prog}: error: {one_line(message)} "
                                f"(see {self.prog} --help)\n")


def _quiet_stdout() -> None:
    """The reader went away: point stdout at /dev/null so the final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file here
        pass


#: Where each chapter can be seen from a terminal (the rest run in their notebooks).
CHAPTER_DEMOS: dict[str, str] = {
    "s12": "labmem demo s12               the five recall stages on the example records",
    "walkthrough": "labmem walkthrough            every layer in one offline, restart-safe run",
    "resilience": "labmem resilience             the fault-injection scorecard",
    "case study": "labmem story stats --project data/story/tide-lamp   the story memory",
    "s15": "labmem mcp --home DIR         the MCP server an agent host starts",
}
DEMO_EPILOG = ("Chapters with a terminal demo: " + "; ".join(
    f"{chapter}: {line.split('  ')[0]}" for chapter, line in CHAPTER_DEMOS.items())
    + ". s09-s11, s13 and s14 run in their notebooks only.")


def _demo(args: argparse.Namespace) -> int:
    from labmem.recall import DEMOS

    if args.chapter is None:
        print("labmem demo CHAPTER runs a chapter's offline demo. What each chapter offers "
              "from a terminal:")
        for chapter, line in CHAPTER_DEMOS.items():
            print(f"  {chapter:<12} {line}")
        print("s09-s11, s13 and s14 have no terminal demo: run their notebooks "
              "(make lab).")
        return 0
    DEMOS[args.chapter]()
    return 0


def register_demo(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="run a chapter's offline demo (no chapter: list them)",
                            epilog=DEMO_EPILOG)
    parser.add_argument("chapter", nargs="?", choices=["s12"],
                        help="which chapter (only s12 has a demo of its own)")
    parser.set_defaults(handler=_demo)


EXAMPLES_HINT = ("add the chapter's example records with `labmem examples add` (or rerun "
                 "with --with-examples), or let an agent remember something through "
                 "`labmem mcp`")


def _recall(args: argparse.Namespace) -> int:
    from labmem.recall import RecallEngine, default_runtime, render_recalled_context

    runtime = default_runtime(home=args.home, user_id=args.user,
                              with_examples=args.with_examples, **database_options(args))
    empty = runtime.store.is_empty()
    result = RecallEngine(runtime.store, scorer=args.scorer).recall(args.query,
                                                                      limit=args.limit)
    if empty:  # said on stderr, so that --json's output stays JSON
        print(f"labmem: no records yet in {runtime.location}: {EXAMPLES_HINT}",
              file=sys.stderr)
    if args.json:
        print(result.to_json())
    elif result.hits:
        print(render_recalled_context(result))
    elif not empty:
        print(f"no hits ({result.empty_reason}); searched {result.searched_records} records")
    return 0


DATABASE_FLAG = "--database-url"
DATABASE_HELP = ("a PostgreSQL URL (postgresql://USER[:PASSWORD]@HOST/DATABASE; default "
                 "$LABMEM_DATABASE_URL): the remote-memory records live on that server, "
                 "shared by every host given it, instead of under the home")


def add_database_option(parser: argparse.ArgumentParser, help_text: str = DATABASE_HELP
                        ) -> None:
    parser.add_argument(DATABASE_FLAG, dest="database_url", metavar="URL", help=help_text)


def database_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``--database-url`` given, as ``default_runtime`` keywords (none: it reads
    ``$LABMEM_DATABASE_URL`` itself, and names the variable in its errors)."""
    if args.database_url is None:
        return {}
    return {"database_url": args.database_url, "database_url_field": DATABASE_FLAG}


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--home``, ``--user`` and ``--database-url``: which user's store, and where."""
    parser.add_argument("--home", help="the labmem home ($LABMEM_HOME, default ~/.labmem)")
    parser.add_argument("--user", help="whose memory ($LABMEM_USER_ID, default learner)")
    add_database_option(parser)


def register_recall(sub: argparse._SubParsersAction) -> None:
    from labmem.recall import DEFAULT_SCORER, SCORER_NAMES

    parser = sub.add_parser(
        "recall", help="query a user's remote memory store ($LABMEM_HOME or "
                   "$LABMEM_DATABASE_URL, $LABMEM_USER_ID)")
    parser.add_argument("query", help="a self-contained description of what to recall")
    parser.add_argument("--limit", type=int, default=5, help="hits to return, 1-10")
    parser.add_argument("--json", action="store_true", help="print the JSON tool result")
    parser.add_argument("--scorer", choices=SCORER_NAMES, default=DEFAULT_SCORER,
                        help=f"how hits are scored (default {DEFAULT_SCORER}; chapter s12b "
                             "compares them)")
    add_store_options(parser)
    parser.add_argument("--with-examples", action="store_true",
                        help="first add the chapter's example records that are not stored "
                             "yet (they stay in the store: they are records like any other)")
    parser.set_defaults(handler=_recall)


def _examples(args: argparse.Namespace) -> int:
    from labmem.recall import TEACHING_RECORDS, add_teaching_records, default_runtime

    if args.action == "list":
        for item in TEACHING_RECORDS:
            print(f"{item['memory_id']:<18} {item['kind']:<12} {item['source']['title']}: "
                  f"{item['summary'] or item['content']}")
        return 0
    runtime = default_runtime(home=args.home, user_id=args.user, **database_options(args))
    added = add_teaching_records(runtime.store)
    already = len(TEACHING_RECORDS) - added
    print(f"added {added} example records to {runtime.location} "
          f"(user scope {runtime.store.user_scope})"
          + (f"; {already} were there already" if already else ""))
    return 0


def register_examples(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("examples", help="the chapter's example records: list them, or add "
                                             "them to a store (nothing adds them by itself)")
    parser.add_argument("action", choices=["list", "add"],
                        help="list: print them; add: append the ones not stored yet")
    add_store_options(parser)
    parser.set_defaults(handler=_examples)


def _chat(args: argparse.Namespace) -> int:
    from pathlib import Path

    from labmem.chat import run_chat

    return run_chat(workdir=Path(args.workdir), memory_tool=args.memory_tool,
                    with_examples=args.with_examples, **database_options(args))


def register_chat(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("chat", help="talk to a model that can recall your history "
                                         "(needs the online extra, ANTHROPIC_API_KEY, MODEL_ID)")
    parser.add_argument("--workdir", default=".", help="directory read_file may read")
    parser.add_argument("--memory-tool", action="store_true",
                        help="also give the model the memory tool: its /memories live under "
                             "$LABMEM_HOME/memory-tool/, every command logged (s15)")
    parser.add_argument("--with-examples", action="store_true",
                        help="first add the chapter's example records to the store "
                             "recall_history searches (they stay there)")
    add_database_option(parser, DATABASE_HELP + " (the memory tool's files stay under "
                                                "$LABMEM_HOME)")
    parser.set_defaults(handler=_chat)


def _mcp(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from labmem.agents import MemoryToolbox, require_mcp, run_mcp_server
    from labmem.core.clock import SteppingClock
    from labmem.recall import ENV_DATABASE_URL, given_database_url

    require_mcp()  # before the home is touched
    if args.home is None and given_database_url(args.database_url)[0] is None:
        raise InvalidInputError("--home", "is required without a database URL",
                                f"pass --home DIR, {DATABASE_FLAG} URL (or set "
                                f"${ENV_DATABASE_URL}), or both")
    clock = SteppingClock(args.at, timedelta(seconds=1)) if args.at else None
    toolbox = MemoryToolbox(args.home, user_id=args.user, workspace_id=args.workspace,
                            clock=clock, **database_options(args))
    return run_mcp_server(toolbox)


def register_mcp(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("mcp", help="serve one user's memory (a home, a database or "
                                        "both) to an agent host over MCP (stdio; needs the "
                                        "mcp extra)")
    parser.add_argument("--home", help="the labmem home the tools read and write (created "
                                       "if missing); required without a database URL")
    parser.add_argument("--user", default=os.environ.get("LABMEM_USER_ID") or "learner",
                        help="whose memory ($LABMEM_USER_ID, default learner)")
    parser.add_argument("--workspace", default="default", help="which workspace's facts")
    parser.add_argument("--at", help="start a clock that ticks one second per reading at this "
                                     "time (ISO-8601 with zone), for reproducible runs; "
                                     "default: the system clock")
    add_database_option(parser, DATABASE_HELP + ". With --home too, the other eight tools "
                        "keep their files under the home (this host's own); without one, the "
                        "server offers only recall_history and remember_record")
    parser.set_defaults(handler=_mcp)


def _db(args: argparse.Namespace) -> int:
    from labmem.recall import ENV_DATABASE_URL, given_database_url, manage_database

    url, field = given_database_url(args.database_url, DATABASE_FLAG)
    if url is None:
        raise InvalidInputError(DATABASE_FLAG, "is required",
                                f"pass the database's URL (or set ${ENV_DATABASE_URL})")
    change = manage_database(args.action, url, field=field)
    where, newest = f"database {change.database!r}", change.newest
    if args.action == "status":
        if change.after == newest:
            print(f"{where}: labmem schema version {newest} (up to date)")
            return 0
        if change.after == 0:
            print(f"{where}: no labmem schema; an administrator runs `labmem db init "
                  f"{DATABASE_FLAG} ADMIN_URL`")
        elif change.after < newest:
            print(f"{where}: labmem schema version {change.after}, this labmem needs "
                  f"{newest}; an administrator runs `labmem db upgrade {DATABASE_FLAG} "
                  "ADMIN_URL`")
        else:
            print(f"{where}: labmem schema version {change.after}, newer than this "
                  f"labmem's {newest}; upgrade labmem on this host")
        return 1
    if change.before == change.after:
        print(f"{where}: already at labmem schema version {change.after}; nothing changed")
    elif change.before == 0:
        print(f"{where}: created labmem schema version {change.after}")
    else:
        print(f"{where}: upgraded the labmem schema from version {change.before} to "
              f"{change.after}")
    return 0


def register_db(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("db", help="create, upgrade or check the labmem schema on a "
                                       "PostgreSQL server (needs the postgres extra)",
                            epilog="init and upgrade need an administrator's URL (a role that "
                                   "may create tables and roles); init on a database already "
                                   "at this version changes nothing. status only reads, and "
                                   "exits 1 unless the schema is this labmem's version.")
    parser.add_argument("action", choices=["init", "upgrade", "status"],
                        help="init: create the schema and the application role; upgrade: "
                             "migrate an older schema; status: print its version")
    add_database_option(parser, "the database's URL (default $LABMEM_DATABASE_URL); "
                                "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
    parser.set_defaults(handler=_db)


def _resilience(args: argparse.Namespace) -> int:
    from pathlib import Path

    from labmem.resilience import run_scorecard

    results, _ = run_scorecard(Path(args.output_dir) if args.output_dir else None)
    return 0 if all(r.passed for r in results) else 1


def register_resilience(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("resilience", help="run the fault-injection scorecard")
    parser.add_argument("--output-dir", help="where to write resilience_report.json "
                                             "(default: no report is written)")
    parser.set_defaults(handler=_resilience)


def _walkthrough(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    from labmem.core.clock import FixedClock
    from labmem.walkthrough import run_walkthrough

    if args.home:
        result = run_walkthrough(Path(args.home), clock=FixedClock(args.at))
        print(f"manifest: {result.manifest_path}")
        return 0 if result.ok else 1
    with tempfile.TemporaryDirectory(prefix="labmem-walkthrough-") as home:
        result = run_walkthrough(Path(home), clock=FixedClock(args.at))
    print("the run's home was a temporary directory, now removed; add --home DIR to keep it "
          "and its manifest")
    return 0 if result.ok else 1


def register_walkthrough(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("walkthrough", help="run every memory layer in one offline, "
                                                "restart-safe run and check the boundaries")
    parser.add_argument("--home", help="a directory without a manifest, kept after the run "
                                       "(default: a temporary directory, removed at the end)")
    parser.add_argument("--at", default="2026-08-01T12:00:00Z",
                        help="the fixed start time of the run's clock (ISO-8601 with zone)")
    parser.set_defaults(handler=_walkthrough)


STORY_HELP = "long-term memory of a serialized novel (case study)"


def register_story(sub: argparse._SubParsersAction) -> None:
    from labmem.story import register_story_commands

    register_story_commands(sub)


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    register_demo, register_recall, register_examples, register_chat, register_resilience,
    register_story, register_walkthrough, register_mcp, register_db,
]


#: Commands whose parsers import a whole package: registered in full only when chosen
#: (or for ``--help``), so ``labmem recall`` does not pay for the story case study.
LAZY_COMMANDS: dict[Callable[[argparse._SubParsersAction], None], tuple[str, str]] = {
    register_story: ("story", STORY_HELP),
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``labmem`` parser; given ``argv``, only the chosen command's parser is built in
    full (the others it names but does not import)."""
    parser = OneLineParser(prog="labmem", description="labmem: how agents remember",
                           epilog="Installed by make into .venv/bin: run .venv/bin/labmem, or "
                                  "`. .venv/bin/activate` first. " + DEMO_EPILOG)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None) if argv else None
    for register in COMMANDS:
        name, help_text = LAZY_COMMANDS.get(register, (None, ""))
        if name is None or chosen is None or chosen == name:
            register(sub)
        else:
            sub.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:  # no command: say which there are
        parser.print_help()
        return 0
    try:
        status = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except LabmemError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(describe_os_error(exc))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
