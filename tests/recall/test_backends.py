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
    AppendsInBatches,
    KeepsAnalyzedGroups,
    KeepsRecordContext,
    KeepsTermBounds,
    KeepsTermIndex,
    LendsPostings,
    NamesPositions,
    RanksIndex,
    ReadsInBulk,
    offers,
)
from labmem.recall.pruning import MaxScore
from labmem.recall.store import RecallStore

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
    index_tricks = (LendsPostings, NamesPositions, KeepsTermBounds, KeepsRecordContext,
                    KeepsAnalyzedGroups, ReadsInBulk)
    assert [offers(memory_index, p) for p in index_tricks] == [True] * 5 + [False]
    assert [offers(sqlite_index, p) for p in index_tricks] == [True] + [False] * 4 + [True]
    assert offers(resolve_scorer("contextual"), RanksIndex)
    for name in ("teaching", "bm25", "bm25_recency"):
        assert not offers(resolve_scorer(name), RanksIndex)
    assert [offers(jsonl, p) for p in (KeepsTermIndex, AppendsInBatches)] == [False, True]
    assert [offers(sqlite, p) for p in (KeepsTermIndex, AppendsInBatches)] == [True, True]
    assert isinstance(jsonl, RecallStore) and isinstance(sqlite, RecallStore)
    # declared, so a reader sees the promise on the class itself: every trick offered is
    # among the class's bases, not merely matched by a method's name
    offered = [(memory_index, index_tricks[:5]), (sqlite_index, (LendsPostings, ReadsInBulk)),
               (resolve_scorer("contextual"), (RanksIndex,)),
               (jsonl, (RecallStore, AppendsInBatches)),
               (sqlite, (RecallStore, KeepsTermIndex, AppendsInBatches))]
    for thing, protocols in offered:
        assert set(protocols) <= set(type(thing).__mro__), type(thing).__name__


# -- no capability probed by attribute name ----------------------------------------------

#: The getattr calls left in labmem/recall that name an attribute by a constant, and why
#: none of them asks what an object can do (a trick is a protocol: labmem.recall.protocols).
ALLOWED_GETATTR = {
    ("fields.py", "_ATTRIBUTE"): "reads the record context memo that record_context keeps "
                                 "on an index object, not a capability of the index",
    ("index.py", "'O_BINARY'"): "a flag of the os module that only Windows defines (open "
                                "the file in binary mode), not a recall object's trick",
}


def attribute_probes(path: Path) -> list[tuple[str, str, int]]:
    """(file, attribute as written, line) of every ``hasattr`` and of every ``getattr``
    that names its attribute by a constant (a string, or a module's UPPER_CASE name).
    A getattr whose name is a variable reads one of the object's own declared fields by
    name (a scorer's weights, a context's columns, in a loop over their names)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2):
            continue
        name = node.args[1]
        constant = isinstance(name, ast.Constant) or (
            isinstance(name, ast.Name) and name.id.lstrip("_").isupper())
        if node.func.id == "hasattr" or constant:
            found.append((path.name, ast.unparse(name), node.lineno))
    return found


def test_no_capability_is_probed_by_attribute_name():
    probes = [p for path in sorted((ROOT / "labmem" / "recall").glob("*.py"))
              for p in attribute_probes(path)]
    unexplained = [p for p in probes if p[:2] not in ALLOWED_GETATTR]
    assert not unexplained, f"declare a protocol instead of probing: {unexplained}"
    assert {p[:2] for p in probes} == set(ALLOWED_GETATTR)  # no stale exception


def test_the_probe_scan_sees_a_probe(tmp_path):
    """The check itself: the probes this package used to make are caught."""
    module = tmp_path / "probing.py"
    module.write_text('own = getattr(store, "term_index", None)\n'
                      'if hasattr(store, "record_at"):\n    pass\n'
                      "for name in FIELDS:\n    total = getattr(self, name)\n")
    assert attribute_probes(module) == [("probing.py", "'term_index'", 1),
                                        ("probing.py", "'record_at'", 2)]


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
