"""``labmem story …``: inspect and update a story project's long-term memory.

::

    labmem story stats      --project DIR [--json]   items by category and status
    labmem story query NAME --project DIR [--json]   everything remembered about NAME
    labmem story dump       --project DIR [--json] [--category C] [--status S]
    labmem story conflicts  --project DIR [--json]   contradicted claims
    labmem story bootstrap  --project DIR [--json] [--write]   rebuild from index + summaries
    labmem story update RESULT.json --project DIR [--summary S.json] [--outline O.md] [--json]

``labmem.cli.main`` turns every :class:`~labmem.core.errors.LabmemError` into
``labmem: error: …`` and exit status 2; this module only raises them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from labmem.core.validation import parse_json
from labmem.story.adapter import MemoryContractAdapter
from labmem.story.bootstrap import bootstrap
from labmem.story.errors import StoryNotFoundError, StoryProjectError, StoryValidationError
from labmem.story.evidence import read_state
from labmem.story.project import NEW_PROJECT_HINT, StoryProject
from labmem.story.scratchpad import CATEGORIES, STATUSES, MemoryItem, load_scratchpad


def _project(args: argparse.Namespace) -> StoryProject:
    return StoryProject(Path(args.project)).require_existing()


def _emit(args: argparse.Namespace, document: Any, lines: list[str]) -> int:
    if args.json:
        print(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True))
    else:
        print("\n".join(lines) if lines else "(nothing)")
    return 0


def _item_line(item: MemoryItem) -> str:
    reported = "" if item.reported_chapter == item.source_chapter else \
        f", reported in ch {item.reported_chapter}"
    return f"{item.id} {item.status:<12} {item.category:<16} {item.name} = {item.value} " \
           f"(ch {item.source_chapter}{reported})"


def _stats(args: argparse.Namespace) -> int:
    project = _project(args)
    pad = load_scratchpad(project.scratchpad_path)
    counts = pad.counts()
    document = {"items": len(pad.items), "by_category": counts,
                "open_loops": len(pad.open_loops()),
                "contradictions": len(pad.contradictions()),
                "last_chapter": read_state(project)["progress"]["last_chapter"]}
    lines = [f"{len(pad.items)} items, last chapter {document['last_chapter']}, "
             f"{document['open_loops']} open loops, {document['contradictions']} contradicted"]
    lines += [f"  {category:<16} " + " ".join(f"{s}={n}" for s, n in counts[category].items())
              for category in CATEGORIES]
    return _emit(args, document, lines)


def _query(args: argparse.Namespace) -> int:
    items = MemoryContractAdapter(_project(args)).query_entity(args.entity)
    if not items:
        raise StoryNotFoundError(f"entity {args.entity!r}: nothing remembered; "
                                 "check the spelling with `story dump`")
    return _emit(args, [i.to_dict() for i in items], [_item_line(i) for i in items])


def _dump(args: argparse.Namespace) -> int:
    pad = load_scratchpad(_project(args).scratchpad_path)
    items = [i for i in pad.items if (args.category is None or i.category == args.category)
             and (args.status is None or i.status == args.status)]
    return _emit(args, [i.to_dict() for i in items], [_item_line(i) for i in items])


def _conflicts(args: argparse.Namespace) -> int:
    items = load_scratchpad(_project(args).scratchpad_path).contradictions()
    return _emit(args, [i.to_dict() for i in items], [_item_line(i) for i in items])


def _bootstrap(args: argparse.Namespace) -> int:
    rebuilt, diff = bootstrap(_project(args), write=args.write)
    document = {"rebuilt_items": len(rebuilt.items), "written": args.write, **diff.to_dict()}
    lines = [f"rebuilt {len(rebuilt.items)} items from index.db and summaries/"
             + (" (written)" if args.write else " (dry run; --write to adopt)"),
             f"  matching {len(diff.matching)}, differing {len(diff.differing)}, "
             f"only stored {len(diff.only_stored)}, only rebuilt {len(diff.only_rebuilt)}"]
    lines += [f"  differs {key}: stored {old!r}, rebuilt {new!r}"
              for key, old, new in diff.differing]
    lines += [f"  only rebuilt {key}" for key in diff.only_rebuilt]
    lines.append(f"  {'changed' if args.write else '--write will change'} "
                 f"{len(diff.changes)} keys" + (":" if diff.changes else ""))
    lines += [f"    {key}: {now} -> {after}" for key, now, after in diff.changes]
    return _emit(args, document, lines)


def _read_json(path: str, field: str) -> Any:
    try:
        return parse_json(Path(path).read_bytes())
    except FileNotFoundError:
        raise StoryNotFoundError(f"{field} {Path(path).name!r}: file does not exist") from None
    except ValueError as exc:  # not UTF-8, not JSON, or nested past the core's bound
        raise StoryValidationError(field, f"is not valid JSON ({exc})",
                                   "pass a chapter result as a JSON object") from None


def _update(args: argparse.Namespace) -> int:
    root = Path(args.project)
    if not root.is_dir():
        raise StoryProjectError(f"project {root.name!r}: directory does not exist; "
                                + NEW_PROJECT_HINT)
    result = _read_json(args.result, "result")
    summary = _read_json(args.summary, "summary") if args.summary else None
    outline = None
    if args.outline:
        try:
            outline = Path(args.outline).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise StoryNotFoundError(f"outline {Path(args.outline).name!r}: "
                                     "file does not exist") from None
    report = MemoryContractAdapter(StoryProject(root)).commit_chapter(
        result, summary=summary, outline=outline)
    memory = report.memory
    document = {"chapter": report.chapter, "actions": memory.actions(),
                "warnings": list(memory.warnings),
                "compaction": None if memory.compaction is None else {
                    "before": memory.compaction.before, "after": memory.compaction.after,
                    "removed": memory.compaction.reasons()}}
    lines = [f"chapter {report.chapter} committed: "
             + ", ".join(f"{k}={v}" for k, v in memory.actions().items())]
    lines += [f"  warning: {w}" for w in memory.warnings]
    if memory.compaction is not None:
        lines.append(f"  compacted {memory.compaction.before} -> {memory.compaction.after} items")
    return _emit(args, document, lines)


def register_story_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``story`` and its six sub-commands to the ``labmem`` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--project", required=True, metavar="DIR",
                        help="the story project directory")
    common.add_argument("--json", action="store_true", help="print JSON")
    parser = sub.add_parser("story", help="long-term memory of a serialized novel (case study)")
    story = parser.add_subparsers(dest="story_command", required=True)
    story.add_parser("stats", parents=[common], help="items by category and status") \
        .set_defaults(handler=_stats)
    query = story.add_parser("query", parents=[common], help="everything about one entity")
    query.add_argument("entity", help="an entity name, e.g. 'Mara Venn'")
    query.set_defaults(handler=_query)
    dump = story.add_parser("dump", parents=[common], help="list scratchpad items")
    dump.add_argument("--category", choices=CATEGORIES)
    dump.add_argument("--status", choices=STATUSES)
    dump.set_defaults(handler=_dump)
    story.add_parser("conflicts", parents=[common], help="contradicted claims") \
        .set_defaults(handler=_conflicts)
    boot = story.add_parser("bootstrap", parents=[common],
                            help="rebuild the scratchpad from index.db and summaries/")
    boot.add_argument("--write", action="store_true", help="adopt the rebuilt items")
    boot.set_defaults(handler=_bootstrap)
    update = story.add_parser("update", parents=[common], help="commit one chapter result")
    update.add_argument("result", help="chapter result JSON file")
    update.add_argument("--summary", help="chapter summary JSON file")
    update.add_argument("--outline", help="chapter outline text file")
    update.set_defaults(handler=_update)
