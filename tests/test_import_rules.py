"""The folder tree is the architecture; these tests keep the imports saying the same thing.

* ``labmem.core`` imports nothing else of labmem.
* A layer (one chapter) imports the core and itself. The one exception is explicit:
  ``labmem.context.sources`` re-resolves source pointers through the s09 and s13 owners'
  public packages.
* ``labmem.scratch`` (the chapters' from-scratch modules, the references the fast layers are
  held equal to) imports the standard library and itself only: a reference never depends on
  a fast path, and a learner reads it without the rest of the library. Anything but the
  core may import a from-scratch module by name (``from labmem.scratch import s12``).
* Everything outside a package imports it through its public ``__init__`` only
  (``from labmem.recall import RecallEngine``, never ``labmem.recall.pipeline``), so a
  package's internals can change without breaking another layer.

The checker reads source with :mod:`ast` (imports inside functions count too); the tests at
the end feed it deliberately bad modules to show that it bites.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "labmem"

CORE = "core"
SCRATCH = "scratch"
LAYERS = frozenset({"transcript", "workspace", "user", "recall", "artifacts", "context",
                    "mmu", "story"})
FACES = frozenset({"walkthrough", "resilience", "cli", "chat", "notebook", "exercises",
                   "agents"})
# (importing module, imported unit): the exceptions, each one named
ALLOWED_CROSS_LAYER = frozenset({("labmem.context.sources", "transcript"),
                                 ("labmem.context.sources", "artifacts")})

TREE = {"__init__.py", "core", "transcript", "workspace", "user", "recall", "artifacts",
        "context", "mmu", "story", "walkthrough", "resilience.py", "cli.py", "chat.py",
        "notebook.py", "exercises", "agents", "scratch", "locale"}
CORE_MODULES = {"__init__", "clock", "errors", "provenance", "storage", "locking", "arrayfile",
                "text", "validation", "metrics", "render", "i18n"}
OLD_MODULES = ["clock", "errors", "provenance", "storage", "text", "validation", "metrics",
               "remote", "remote_sqlite", "recall_index", "recall_scorers", "recall_eval",
               "recall_tool", "leases", "cleanup", "compaction", "sources"]


def library_sources(root: Path = PACKAGE_DIR) -> dict[str, str]:
    """Module name → source text for every ``.py`` file under ``labmem/``."""
    sources = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


def unit_of(module: str) -> str:
    """``labmem.recall.pipeline`` → ``recall``; ``labmem`` itself → ``labmem``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "labmem"


def imported_modules(module: str, source: str, is_package: bool,
                     known: set[str]) -> list[tuple[str, int]]:
    """Every labmem module ``module`` imports, with the line, relative imports resolved.

    ``from labmem.recall import pipeline`` counts as importing ``labmem.recall.pipeline``
    when that is a module (it reaches past the package's ``__init__``).
    """
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for base, level, line, names in import_statements(source):
        if base is None:  # import a, b
            found += [(name, line) for name in names]
            continue
        if level:
            anchor = package.split(".")
            anchor = anchor[:len(anchor) - (level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        found.append((base, line))
        found += [(f"{base}.{name}", line) for name in names if f"{base}.{name}" in known]
    return [(name, line) for name, line in found
            if name == "labmem" or name.startswith("labmem.")]


@functools.cache
def import_statements(source: str) -> tuple[tuple[str | None, int, int, tuple[str, ...]], ...]:
    """``(from-module or None, level, line, names)`` of every import statement in ``source``.

    Parsed once per text: the tests below re-check the whole library a dozen times with
    one module changed, and parsing every module each time was most of their run time.
    """
    statements = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            statements.append((None, 0, node.lineno, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            statements.append((node.module or "", node.level, node.lineno,
                               tuple(a.name for a in node.names)))
    return tuple(statements)


def violations(sources: dict[str, str], packages: set[str]) -> list[str]:
    """Every broken import rule, as ``module:line imports target (why)``."""
    known = set(sources)
    problems = []
    for module, source in sources.items():
        here = unit_of(module)
        for target, line in imported_modules(module, source, module in packages, known):
            there = unit_of(target)
            where = f"{module}:{line} imports {target}"
            if there == here or there == "labmem" and target == "labmem":
                continue
            if here == CORE:
                problems.append(f"{where} (the core imports no layer or face)")
            elif here == SCRATCH:
                problems.append(f"{where} (a from-scratch module imports the standard library "
                                "and labmem.scratch only)")
            elif there in (CORE, SCRATCH):
                continue
            elif here in LAYERS and there not in LAYERS:
                problems.append(f"{where} (a layer never imports a face)")
            elif here in LAYERS and (module, there) not in ALLOWED_CROSS_LAYER:
                problems.append(f"{where} (a layer imports only the core and itself)")
            elif target != f"labmem.{there}":
                problems.append(f"{where} (import the public package labmem.{there}, "
                                "not its internals)")
    return problems


def packages_of(root: Path = PACKAGE_DIR) -> set[str]:
    return {".".join(p.parent.relative_to(root.parent).parts) for p in root.rglob("__init__.py")}


# -- the rules hold ---------------------------------------------------------------------


def test_the_library_keeps_the_import_rules():
    assert violations(library_sources(), packages_of()) == []


def test_the_top_level_is_the_architecture():
    entries = {p.name for p in PACKAGE_DIR.iterdir() if p.name != "__pycache__"}
    assert entries == TREE
    assert {p.stem for p in (PACKAGE_DIR / "core").glob("*.py")} == CORE_MODULES


@pytest.mark.parametrize("old", OLD_MODULES)
def test_old_flat_module_names_are_gone(old):
    assert importlib.util.find_spec(f"labmem.{old}") is None


CHAPTER_API = {
    "labmem.recall": ["RemoteMemoryStore", "SqliteMemoryStore", "MemoryKind", "MemorySource",
                      "StoredMemory", "RecallEngine", "normalize_recall_query",
                      "build_recall_candidates", "score_recall_candidate",
                      "stable_rank_recall_candidates", "render_recalled_context",
                      "RecallResult", "RecallHit", "RecallQueryError", "RemoteMemoryError",
                      "RemoteMemoryScopeError", "Bm25Scorer", "recall_history"],
    "labmem.artifacts": ["ToolResultExternalizer", "LeaseJournal", "plan_cleanup",
                         "apply_cleanup", "ArtifactIntegrityError", "RetentionClaim"],
    "labmem.context": ["compact_context", "CompactionPolicy", "render_durable_context",
                       "SourcePointerResolver", "DurableContextState"],
    "labmem.workspace": ["WorkspaceMemory", "DistillPolicy"],
    "labmem.mmu": ["ContextMMU", "FileMemoryService"],
    "labmem.story": ["MemoryContractAdapter", "Scratchpad"],
    "labmem.walkthrough": ["run_walkthrough"],
    "labmem.agents": ["MemoryToolbox", "MemoryDirectory", "LabmemMemoryTool", "call_server",
                      "LocalMessagesAPI", "host_config"],
}


@pytest.mark.parametrize("package", sorted(CHAPTER_API))
def test_each_chapter_package_exports_its_api(package):
    module = importlib.import_module(package)
    assert set(CHAPTER_API[package]) <= set(module.__all__)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


# -- and the checker bites -------------------------------------------------------------

BAD_IMPORTS = [
    ("labmem.core.text", "from labmem.recall import RecallEngine", "the core imports no"),
    ("labmem.core.text", "import labmem.transcript", "the core imports no"),
    ("labmem.user", "from labmem.transcript import Transcript", "only the core and itself"),
    ("labmem.mmu.service", "from labmem.recall import RecallEngine",
     "only the core and itself"),
    ("labmem.recall.store", "from labmem.cli import main", "never imports a face"),
    ("labmem.context.compaction", "from labmem.transcript import Transcript",
     "only the core and itself"),
    ("labmem.context.sources", "from labmem.artifacts.externalize import parse_source_id",
     "public package"),
    ("labmem.walkthrough.run", "from labmem.recall.pipeline import RecallEngine",
     "public package"),
    ("labmem.cli", "from labmem.recall import pipeline", "public package"),
    ("labmem.cli", "def f():\n    from labmem.mmu.scoring import recency", "public package"),
    ("labmem.recall.store", "from ..cli import main", "never imports a face"),
    ("labmem.scratch", "from labmem.core.text import extract_terms", "from-scratch module"),
    ("labmem.scratch", "from labmem.recall import RecallEngine", "from-scratch module"),
    ("labmem.core.text", "from labmem.scratch.s09 import Transcript", "the core imports no"),
]


@pytest.mark.parametrize("module,line,why", BAD_IMPORTS)
def test_a_deliberate_bad_import_is_reported(module, line, why):
    sources = library_sources()
    sources[module] = sources[module] + "\n" + line + "\n"
    (problem,) = violations(sources, packages_of())
    assert problem.startswith(f"{module}:") and why in problem


def test_allowed_imports_are_not_reported():
    sources = library_sources()
    sources["labmem.cli"] += "\nfrom labmem.recall import RecallEngine\n"
    sources["labmem.recall.store"] += "\nfrom labmem.recall.index import Postings\n"
    sources["labmem.mmu.pages"] += "\nfrom labmem.core.text import estimate_tokens\n"
    sources["labmem.recall.pipeline"] += "\nfrom labmem.scratch import s12\n"
    assert violations(sources, packages_of()) == []
