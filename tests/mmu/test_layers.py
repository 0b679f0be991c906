"""The package's two groups: the mechanism never imports the persistence side."""

import ast
import copy
import dataclasses
import pickle
from pathlib import Path

import labmem.mmu
from labmem.core.clock import SteppingClock
from labmem.mmu import ContextMMU, FileMemoryService, MemoryRecord
from labmem.mmu.lazy import LazyRecord, RowPageTable
from labmem.mmu.pages import PageTable

PACKAGE = Path(labmem.mmu.__file__).parent
MECHANISM = ("records", "pages", "scoring", "mmu", "request", "trace", "evaluation", "errors")
PERSISTENCE = ("service", "logline", "snapshot", "lazy", "index")


def _mmu_imports(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("labmem.mmu."):
            found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.rsplit(".", 1)[1] for a in node.names
                      if a.name.startswith("labmem.mmu.")}
    return found


def test_every_module_is_in_one_group():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set(MECHANISM) | set(PERSISTENCE)


def test_the_mechanism_imports_no_persistence_module():
    assert {m: sorted(_mmu_imports(m) & set(PERSISTENCE)) for m in MECHANISM} == {
        m: [] for m in MECHANISM}


def test_the_plain_record_and_table_know_nothing_of_rows():
    assert "__getattr__" not in vars(MemoryRecord) and "trusted" not in vars(MemoryRecord)
    assert not hasattr(PageTable(), "_source")


def test_a_lazy_record_stands_for_the_plain_record(tmp_path):
    clock = SteppingClock("2026-01-01T00:00:00Z")
    svc = FileMemoryService(tmp_path, clock=clock, snapshot_lines=1)
    written = svc.remember("semantic", scope="alice", title="port", text="The port is 18400.",
                           outcome="succeeded", evidence=["ev1"], source_kind="tool_observed",
                           origin_key="port")
    svc.save_snapshot()
    svc.close()
    reopened = FileMemoryService(tmp_path, clock=clock, snapshot_lines=1)
    assert reopened.snapshot_state == "loaded"
    mmu = ContextMMU(reopened, token_budget=200)
    assert type(mmu.pages) is RowPageTable and mmu.pages.made == 0
    lazy = mmu.pages[written.record_id].record
    assert type(lazy) is LazyRecord and "text" not in lazy.__dict__
    assert lazy == written and written == lazy and hash(lazy) == hash(written)
    for twin in (copy.copy(lazy), pickle.loads(pickle.dumps(lazy))):
        assert type(twin) is MemoryRecord and twin == written
    assert repr(lazy) == repr(written)
    assert type(dataclasses.replace(lazy, version=2)) is MemoryRecord  # a new version: plain
    reopened.close()
