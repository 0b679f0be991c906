"""The engine's two backends, the fast path's protocols, and the reference → fast import rule."""

import ast
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from labmem.core.clock import FixedClock
from labmem.core.errors import InvalidInputError
from labmem.core.provenance import MemorySource
from labmem.recall import (
    MemoryKind,
    RecallEngine,
    RemoteMemoryStore,
    SqliteMemoryStore,
    build_recall_candidates,
    normalize_recall_query,
    resolve_scorer,
)
from labmem.recall.index import InMemoryTermIndex
from labmem.recall.packed import PackedRecall
from labmem.recall.protocols import (
    KeepsTermBounds,
    LendsPostings,
    NamesPositions,
    RanksIndex,
    offers,
)
from labmem.recall.pruning import MaxScore

UTC = timezone.utc
NOW = datetime(2026, 8, 1, 12, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
WORDS = ["layered", "memory", "design", "recall", "index", "the", "dog", "记忆", "May"]


def make_store(directory, backend):
    clock = FixedClock(NOW)
    if backend == "sqlite":
        return SqliteMemoryStore(directory / "recall.sqlite3", user_id="alice", clock=clock)
    return RemoteMemoryStore(directory / "records.jsonl", user_id="alice", clock=clock)


def fill(store, n=40):
    for i in range(n):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 5)]
        store.append(kind=MemoryKind.PROFILE if i % 13 == 12 else MemoryKind.CONVERSATION,
                     content=" ".join(words), summary="" if i % 4 else words[0],
                     memory_id=f"m-{i:03d}",
                     source=MemorySource(f"chat:s{i % 3}:{i}", "chat", "notes",
                                         NOW - timedelta(days=i % 9, hours=i)))


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_both_backends_give_the_same_result_for_the_teaching_scorer(tmp_path, backend):
    store = make_store(tmp_path, backend)
    fill(store)
    fast = RecallEngine(store, scorer="teaching")
    reference = RecallEngine(store, scorer="teaching", backend="reference")
    assert fast.backend == "fast" and reference.backend == "reference"
    for text in ("layered memory design", "the dog", "记忆 recall", "index May the",
                 "absent words"):
        for limit in (1, 3, 10):
            got = fast.recall(text, limit=limit, as_of=NOW)
            want = reference.recall(text, limit=limit, as_of=NOW)
            assert got == want, (text, limit)
            assert got.to_dict() == want.to_dict()
        query = normalize_recall_query(text, user_scope=store.user_scope, limit=5)
        assert fast.candidates(query) == reference.candidates(query) == (
            build_recall_candidates(query, store.read_all()))


def test_the_fast_backend_is_the_default_and_a_bad_backend_names_the_field(tmp_path):
    store = make_store(tmp_path, "jsonl")
    assert RecallEngine(store).backend == "fast"
    for bad in ("slow", "", None, 1):
        with pytest.raises(InvalidInputError) as err:
            RecallEngine(store, backend=bad)
        assert err.value.field == "backend"
        assert "'fast'" in str(err.value) and "'reference'" in str(err.value)


def test_the_reference_backend_reads_records_not_an_index(tmp_path):
    store = make_store(tmp_path, "jsonl")
    fill(store, 5)
    engine = RecallEngine(store, backend="reference")
    assert engine.index is None and engine.fast is None
    with pytest.raises(InvalidInputError) as err:
        engine.index = InMemoryTermIndex(store)
    assert err.value.field == "index"


def test_the_reference_backend_refuses_a_scorer_it_does_not_implement(tmp_path):
    store = make_store(tmp_path, "jsonl")
    fill(store, 5)
    with pytest.raises(InvalidInputError) as err:
        RecallEngine(store, scorer="contextual", backend="reference").recall("dog")
    assert err.value.field == "scorer"


def test_each_index_and_scorer_declares_what_it_offers(tmp_path):
    jsonl = make_store(tmp_path, "jsonl")
    sqlite = make_store(tmp_path, "sqlite")
    fill(jsonl, 3)
    fill(sqlite, 3)
    memory_index = RecallEngine(jsonl).index
    sqlite_index = RecallEngine(sqlite).index
    assert [offers(memory_index, p) for p in (LendsPostings, NamesPositions,
                                              KeepsTermBounds)] == [True, True, True]
    assert [offers(sqlite_index, p) for p in (LendsPostings, NamesPositions,
                                              KeepsTermBounds)] == [True, False, False]
    assert offers(resolve_scorer("contextual"), RanksIndex)
    for name in ("teaching", "bm25", "hybrid"):
        assert not offers(resolve_scorer(name), RanksIndex)
    # declared, so a reader sees the promise on the class itself
    assert LendsPostings in type(memory_index).__mro__
    assert LendsPostings in type(sqlite_index).__mro__


def test_the_engine_is_the_stages_plus_a_fast_path_object(tmp_path):
    store = make_store(tmp_path, "jsonl")
    fill(store)
    engine = RecallEngine(store, scorer="bm25")
    assert isinstance(engine.fast, PackedRecall) and isinstance(engine.fast.pruner, MaxScore)
    replaced = InMemoryTermIndex(store, sidecar=False)
    engine.index = replaced  # the fast path follows, and looks its offers up again
    assert engine.fast.index is replaced
    assert engine.recall("memory design", as_of=NOW) == RecallEngine(
        store, scorer="bm25", backend="fast").recall("memory design", as_of=NOW)


def test_a_new_scorer_on_an_engine_reaches_its_fast_path(tmp_path):
    """A tuning loop swaps the scorer of one engine (same index, same record context)."""
    store = make_store(tmp_path, "jsonl")
    fill(store)
    engine = RecallEngine(store, scorer="teaching")
    engine.recall("memory design", as_of=NOW)
    engine.scorer = resolve_scorer("bm25")
    assert engine.fast.scorer is engine.scorer
    assert engine.recall("the memory design", as_of=NOW) == RecallEngine(
        store, scorer="bm25").recall("the memory design", as_of=NOW)


# -- the import rule: a reference never imports a fast path ---------------------------

REFERENCE_MODULES = ["labmem.recall.reference", "labmem.recall.pipeline"]
FAST_MODULES = {"labmem.recall.packed", "labmem.recall.pruning", "labmem.recall.sidecar",
                "labmem.recall.sqlite_store"}


def module_imports(name: str) -> set[str]:
    """The labmem modules ``name`` imports at module level (lazy imports inside a function
    are the engine asking for the fast path when it is chosen, not a dependency)."""
    path = ROOT / (name.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("labmem.")}


def closure(name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        module = todo.pop()
        if module in seen or not (ROOT / (module.replace(".", "/") + ".py")).exists():
            continue
        seen.add(module)
        todo.extend(module_imports(module))
    return seen


@pytest.mark.parametrize("reference", REFERENCE_MODULES)
def test_a_reference_module_never_imports_a_fast_one(reference):
    assert not closure(reference) & FAST_MODULES


def test_the_import_rule_sees_a_fast_import():
    """The check itself: a module that imports the fast path is caught."""
    assert "labmem.recall.pruning" in closure("labmem.recall.packed")
