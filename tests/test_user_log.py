"""s11 storage: the revision log, its compaction, the cached state, crashes in between.

The contracts themselves (revisions, UNCHANGED, stale, tombstones, expiry, scope) are in
tests/test_user.py and tests/test_user_decisions.py; this file checks how they are kept
on disk: one fsync'd line per change, MEMORY.md rewritten on each, a snapshot compacted
now and then, and a state that is read again only when the files changed.
"""

import json
import os
import random
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labmem import user
from labmem.core import storage
from labmem.core.clock import FixedClock, SteppingClock
from labmem.user import (
    STALE,
    UNCHANGED,
    WRITE_BOUNDARIES,
    StalePreferenceUpdateError,
    UserMemory,
    UserMemoryCorruptionError,
    UserScopeError,
    blocks,
    compaction,
    follow,
    preference_write_status,
    render_memory_md,
)
from labmem.user import memory as user_memory
from labmem.user.render import active_at
from tests import user_workers
from tests.file_access import FileAccess
from tests.procs import run_child, run_processes

T0 = datetime(2026, 8, 1, tzinfo=timezone.utc)


def at(hours):
    return T0 + timedelta(hours=hours)


def make(root, user_id="alice", clock=None):
    return UserMemory(root, user_id=user_id,
                      clock=clock or SteppingClock(T0, timedelta(minutes=1)))


def log_lines(memory):
    try:
        raw = memory.preference_log_path.read_bytes()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in raw.split(b"\n")[:-1]]


def every_file(memory):
    return b"".join(p.read_bytes() for p in sorted(memory.directory.iterdir()) if p.is_file())


# -- the write path --------------------------------------------------------------------

def test_a_change_is_one_log_line_and_a_new_memory_md_nothing_else(tmp_path, monkeypatch):
    """At 300 keys a changing write appends one line and rewrites MEMORY.md; it rewrites
    no snapshot (the old code re-encoded and replaced preferences.json every time)."""
    memory = make(tmp_path)
    for k in range(300):
        memory.set_preference(f"key.{k}", f"value {k}")
    memory.set_preference("key.0", "settle")  # whatever compaction is due happens here
    written, appended = [], []
    real_append = storage.JsonlLog.append_many

    def spy(real):
        def spy_write(path, data, **kwargs):
            written.append(os.path.basename(path))
            return real(path, data, **kwargs)
        return spy_write

    def spy_append(self, records):
        appended.extend(records)
        return real_append(self, records)

    for name in ("write_text_atomic", "write_bytes_atomic"):  # every whole-file writer
        real = getattr(storage, name)
        monkeypatch.setattr(storage, name, spy(real))
        for module in (user_memory, follow):  # the package's modules that import it
            if hasattr(module, name):
                monkeypatch.setattr(module, name, spy(real))
    monkeypatch.setattr(storage.JsonlLog, "append_many", spy_append)
    snapshot = memory.preferences_path.read_bytes()
    for i in range(10):
        assert memory.set_preference(f"key.{i + 1}", f"changed {i}").status == "updated"
    assert written == ["MEMORY.md"] * 10
    assert [(r["key"], r["value"], r["revision"]) for r in appended] == \
        [(f"key.{i + 1}", f"changed {i}", 2) for i in range(10)]
    assert memory.preferences_path.read_bytes() == snapshot
    assert "- key.10: changed 9 (revision 2)" in memory.memory_md_path.read_text("utf-8")


def test_lines_carry_scope_and_generation_and_the_snapshot_says_what_it_covers(tmp_path):
    memory = make(tmp_path)
    memory.set_preference("theme", "dark", updated_at=at(1))  # first write: compacted
    assert not memory.preference_log_path.exists()
    memory.set_preference("theme", "light", updated_at=at(2))
    memory.set_preference("reply.language", "English", updated_at=at(2))
    lines = log_lines(memory)
    assert [(r["key"], r["revision"]) for r in lines] == [("theme", 2), ("reply.language", 1)]
    assert {(r["user_scope"], r["generation"]) for r in lines} == {(memory.user_scope, 1)}
    doc = json.loads(memory.preferences_path.read_text(encoding="utf-8"))
    assert doc["format"] == "labmem.user.preferences/v2"
    assert doc["log"] == {"generation": 1, "lines": 0}
    assert doc["preferences"]["theme"]["value"] == "dark"  # the log has the rest
    assert make(tmp_path).get_preference("theme").value == "light"
    # the snapshot: the C encoder, one record per line
    text = memory.preferences_path.read_text(encoding="utf-8")
    assert '\n"theme":{"key":"theme","value":"dark","revision":1,' in text
    assert "  " not in text


def test_the_log_is_compacted_when_it_outgrows_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "COMPACT_MIN_LINES", 4)
    memory = make(tmp_path)
    sizes = []
    for i in range(40):
        memory.set_preference(f"k{i % 10}", f"v{i}")
        sizes.append(len(log_lines(memory)))
    # the log never holds more lines than max(4, keys in the snapshot) + 1
    snapshot_keys = len(json.loads(memory.preferences_path.read_text("utf-8"))["preferences"])
    assert max(sizes) <= max(4, snapshot_keys) + 1 and 0 in sizes[1:]
    fresh = make(tmp_path)
    assert {p.key: p.value for p in fresh.list_preferences()} == \
        {f"k{i}": f"v{30 + i}" for i in range(10)}
    assert all(p.revision == 4 for p in fresh.list_preferences())


def test_a_delete_compacts_so_the_value_leaves_every_file(tmp_path):
    memory = make(tmp_path)
    memory.set_preference("theme", "dark", updated_at=at(1))
    memory.set_preference("secret", "SECRET-MARKER", updated_at=at(1))
    memory.set_preference("secret", "SECRET-MARKER-2", updated_at=at(2))
    assert b"SECRET-MARKER" in every_file(memory)
    assert memory.delete_preference("secret", deleted_at=at(3)).status == "deleted"
    assert b"SECRET-MARKER" not in every_file(memory)
    assert not memory.preference_log_path.exists()
    tomb = make(tmp_path).get_preference("secret")
    assert tomb.deleted and tomb.revision == 3


# -- the cached state --------------------------------------------------------------------

def test_reads_of_an_unchanged_store_open_no_file(tmp_path):
    memory = make(tmp_path)
    for k in range(50):
        memory.set_preference(f"key.{k}", f"value {k}")
    memory.update_profile({"name": "Alice"})
    memory.get_context_for_agent(at(1))  # warm
    opened = FileAccess.start(memory.directory)
    try:
        for _ in range(20):
            memory.list_preferences()
            memory.get_preference("key.3")
            memory.get_context_for_agent(at(1))
            memory.read_profile()
    finally:
        FileAccess.stop()
    assert opened == []  # the old code re-read both snapshots on every call


def test_another_writer_is_seen_by_reading_only_its_new_lines(tmp_path):
    reader, writer = make(tmp_path), make(tmp_path)
    writer.set_preference("a", "1", updated_at=at(1))
    writer.set_preference("b", "1", updated_at=at(1))
    assert [p.key for p in reader.list_preferences()] == ["a", "b"]
    writer.set_preference("a", "2", updated_at=at(2))
    opened = FileAccess.start(reader.directory)
    try:
        assert reader.get_preference("a").value == "2"
    finally:
        FileAccess.stop()
    assert opened == ["preferences.jsonl"]
    writer.delete_preference("b", deleted_at=at(3))  # compacts: a new snapshot, no log
    assert reader.get_preference("b").deleted and reader.get_preference("a").value == "2"
    writer.update_profile({"city": "Oxford"})
    assert reader.read_profile().fields() == {"city": "Oxford"}


def test_a_snapshot_replaced_under_a_reader_is_read_again_and_checked(tmp_path):
    alice, bob = make(tmp_path, "alice"), make(tmp_path, "bob")
    alice.set_preference("theme", "dark", updated_at=at(1))
    bob.set_preference("theme", "light", updated_at=at(1))
    assert bob.get_preference("theme").value == "light"
    os.replace(alice.preferences_path, bob.preferences_path)  # same name, another file
    with pytest.raises(UserScopeError, match="preferences.json"):
        bob.list_preferences()


def test_a_log_copied_from_another_user_is_refused(tmp_path):
    alice, bob = make(tmp_path, "alice"), make(tmp_path, "bob")
    alice.set_preference("theme", "dark", updated_at=at(1))
    alice.set_preference("theme", "light", updated_at=at(2))
    bob.set_preference("x", "1", updated_at=at(1))
    bob.preference_log_path.write_bytes(alice.preference_log_path.read_bytes())
    with pytest.raises(UserScopeError, match="preferences.jsonl line 1"):
        make(tmp_path, "bob").list_preferences()


@pytest.mark.parametrize("mangle, problem", [
    (lambda r: {**r, "revision": 5}, "line 2: revision 5 of 'theme' where 3 was expected"),
    (lambda r: {**r, "generation": 7}, "line 2: generation 7 in a log of generation 1"),
    (lambda r: {**r, "updated_at": "yesterday"}, "line 2: not a revision"),
])
def test_a_bad_log_line_is_corruption_naming_the_line(tmp_path, mangle, problem):
    memory = make(tmp_path)
    for hour in (1, 2, 3):
        memory.set_preference("theme", f"v{hour}", updated_at=at(hour))
    lines = log_lines(memory)
    lines[1] = mangle(lines[1])
    memory.preference_log_path.write_text(
        "".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    reader = make(tmp_path)  # (a rewrite in place is not an append: open a new reader)
    for _ in range(2):  # reported every time, never skipped after the first report
        with pytest.raises(UserMemoryCorruptionError, match=problem):
            reader.list_preferences()
    with pytest.raises(UserMemoryCorruptionError, match=problem):
        reader.set_preference("theme", "v4", updated_at=at(4))


def test_a_log_newer_than_its_snapshot_is_refused(tmp_path):
    memory = make(tmp_path)
    memory.set_preference("theme", "dark", updated_at=at(1))
    old_snapshot = memory.preferences_path.read_bytes()
    memory.delete_preference("theme", deleted_at=at(2))  # compacts to generation 2
    memory.set_preference("theme", "light", updated_at=at(3))
    memory.preferences_path.write_bytes(old_snapshot)  # a restore of an older snapshot
    with pytest.raises(UserMemoryCorruptionError, match="newer than the snapshot"):
        make(tmp_path).list_preferences()


def test_a_v1_snapshot_is_read_as_the_whole_state(tmp_path):
    memory = make(tmp_path)
    memory.directory.mkdir(parents=True)
    memory.preferences_path.write_text(json.dumps({
        "format": "labmem.user.preferences/v1", "user_scope": memory.user_scope,
        "preferences": {"theme": {"key": "theme", "value": "dark", "revision": 4,
                                  "updated_at": "2026-08-01T01:00:00Z"}}}), encoding="utf-8")
    assert memory.get_preference("theme").revision == 4
    assert memory.set_preference("theme", "light", updated_at=at(2)).revision == 5
    assert make(tmp_path).get_preference("theme").value == "light"


# -- the state is the fold of every write, through any pair of instances -----------------

OPS = st.lists(st.tuples(st.sampled_from(["set", "set", "delete"]), st.sampled_from("abcd"),
                         st.sampled_from(["x", "y"]), st.sampled_from([None, 3, 30]),
                         st.integers(-2, 6), st.integers(0, 1)),
               min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_any_run_of_writes_matches_the_decision_rule(tmp_path_factory, ops):
    """Two instances take turns; compaction is due every few lines. After every write both
    instances and a fresh one hold the state the decision rule predicts, and MEMORY.md is
    exactly render_memory_md of it."""
    root = tmp_path_factory.mktemp("u")
    clock = FixedClock(at(0))
    pair = [make(root, clock=clock), make(root, clock=clock)]
    model = {}
    old_min = compaction.COMPACT_MIN_LINES
    compaction.COMPACT_MIN_LINES = 2
    try:
        for step, (op, key, value, expires, hours, who) in enumerate(ops):
            clock.at = at(step)
            when = at(step + hours)
            memory = pair[who]
            before = model.get(key)
            value = None if op == "delete" else f"{value}{step % 3}"
            expires_at = None if value is None or expires is None else when + \
                timedelta(hours=expires)
            decided = preference_write_status(before, value, expires_at, None, when)
            try:
                if value is None:
                    write = memory.delete_preference(key, deleted_at=when)
                else:
                    write = memory.set_preference(key, value, expires_at=expires_at,
                                                  updated_at=when)
            except StalePreferenceUpdateError:
                assert decided == STALE
                continue
            assert write.status == decided
            if decided != UNCHANGED:
                model[key] = user.Preference(
                    key, value, write.revision, when, expires_at=expires_at,
                    deleted_at=when if value is None else None)
                shown = render_memory_md(memory.user_scope, memory.read_profile(),
                                         active_at(model, clock.at), clock.at)
                assert memory.memory_md_path.read_text(encoding="utf-8") == shown
            for reader in (*pair, make(root)):
                assert {k: p for k, p in reader._load_preferences().items()} == model
    finally:
        compaction.COMPACT_MIN_LINES = old_min


# -- crashes ------------------------------------------------------------------------------

def _three_keys(root):
    memory = make(root, clock=FixedClock(at(10)))
    memory.set_preference("a", "A-VALUE", updated_at=at(1))  # compacted: the snapshot
    memory.set_preference("b", "B-VALUE", updated_at=at(1))  # in the log
    memory.set_preference("c", "C-VALUE", updated_at=at(1))
    return memory


@pytest.mark.parametrize("boundary", WRITE_BOUNDARIES)
def test_a_delete_killed_between_its_log_line_and_its_compaction(tmp_path, boundary):
    """The child dies right after each durable step of a delete (log line, MEMORY.md,
    snapshot, log removal). The tombstone counts from the moment its line is durable; a
    retry is UNCHANGED and finishes the rest: MEMORY.md shows the delete and the deleted
    value is gone from every file."""
    _three_keys(tmp_path)
    code = run_child(user_workers.write_and_die_at, str(tmp_path), boundary, "delete", "b",
                     None)
    assert code == user_workers.CRASH_EXIT_CODE
    fresh = make(tmp_path, clock=FixedClock("2026-08-01T12:00:00Z"))
    assert fresh.get_preference("b").deleted and fresh.get_preference("b").revision == 2
    assert [p.key for p in fresh.list_preferences()] == ["a", "c"]
    retry = fresh.delete_preference("b")
    assert (retry.status, retry.revision) == ("unchanged", 2)
    assert b"B-VALUE" not in every_file(fresh)
    assert "- a: A-VALUE (revision 1)" in fresh.memory_md_path.read_text(encoding="utf-8")
    assert not fresh.preference_log_path.exists()
    assert not [p.name for p in fresh.directory.iterdir() if p.name.endswith(".tmp")]
    assert fresh.set_preference("b", "again", updated_at=at(13)).revision == 3
    assert {p.key: p.value for p in make(tmp_path).list_preferences()} == \
        {"a": "A-VALUE", "b": "again", "c": "C-VALUE"}


@pytest.mark.parametrize("boundary", WRITE_BOUNDARIES)
def test_a_first_write_killed_before_its_compaction_finished(tmp_path, boundary):
    """A user's first write is logged, then compacted into the first snapshot: killed at
    any step, the value is there; the retry is UNCHANGED and leaves the same files an
    uninterrupted write leaves."""
    code = run_child(user_workers.write_and_die_at, str(tmp_path), boundary, "set",
                     "theme", "dark")
    assert code == user_workers.CRASH_EXIT_CODE
    fresh = make(tmp_path, clock=FixedClock("2026-08-01T12:00:00Z"))
    assert (fresh.get_preference("theme").value, fresh.get_preference("theme").revision) == \
        ("dark", 1)
    assert fresh.set_preference("theme", "dark").status == "unchanged"
    clean = make(tmp_path / "clean", clock=FixedClock("2026-08-01T12:00:00Z"))
    clean.set_preference("theme", "dark")
    assert sorted(p.name for p in fresh.directory.iterdir()) == \
        sorted(p.name for p in clean.directory.iterdir())
    for name in ("preferences.json", "MEMORY.md"):
        assert (fresh.directory / name).read_bytes() == (clean.directory / name).read_bytes()


def test_kill_9_at_random_moments_loses_no_acknowledged_write(tmp_path):
    """A writer is SIGKILLed at a random moment, five times over, while compaction runs
    every few lines: each restart reads a consistent state that holds every write the
    writer was told had happened (and at most the one it was in the middle of)."""
    acks = tmp_path / "acks.txt"
    rng = random.Random(9)
    first = 0
    for _ in range(5):
        code = run_child(user_workers.write_until_killed, str(tmp_path), str(acks), first, 3,
                         rng.uniform(0.3, 0.8))
        assert code == -9
        stored = make(tmp_path)._load_preferences()
        acked = {}
        for line in acks.read_text(encoding="utf-8").splitlines():
            op, n = line.split()
            acked[f"k{int(n):05d}"] = op
        assert set(acked) <= set(stored)
        unacked = set(stored) - set(acked)  # a set the kill interrupted after its line
        undone = {k for k, op in acked.items() if stored[k].deleted != (op == "del")}
        assert len(unacked) + len(undone) <= 1, (unacked, undone)
        assert all(stored[k].deleted for k in undone)  # only a delete can be half-acked
        assert all(p.revision == (2 if p.deleted else 1) for p in stored.values())
        with open(acks, "a", encoding="utf-8") as handle:  # the interrupted one did happen
            handle.writelines(f"{'del' if k in undone else 'set'} {int(k[1:])}\n"
                              for k in sorted(unacked | undone))
        first = max(int(k[1:]) for k in stored) + 1
    assert first > 20
    assert make(tmp_path).set_preference("after", "the kills").revision == 1


def test_writers_and_lock_free_readers_race_through_compactions(tmp_path):
    """Four writers compacting every couple of lines, and two readers without the lock
    reading all the while: no reader ever fails or sees a revision go back, and no write
    is lost."""
    make(tmp_path).set_preference("seed", "s")
    root = tmp_path / "store"
    make(root).set_preference("seed", "s")
    outcomes = run_processes(user_workers.churn_or_read,
                             lambda w, s: (str(root), w, 4, 40, s.start, s.results), 6)
    expected = {}
    for kind, result in outcomes:
        if kind == "writer":
            expected.update(result)
    assert len(expected) == 4 * 7 and sum(kind == "reader" for kind, _ in outcomes) == 2
    stored = make(root)._load_preferences()
    for key, value in expected.items():
        assert stored[key].value == value, key


# -- MEMORY.md from the kept lines ---------------------------------------------------------

CACHE_OPS = st.lists(st.tuples(st.sampled_from(["set", "set", "set", "delete"]),
                               st.integers(0, 99), st.sampled_from([None, 2, 5]),
                               st.integers(0, 8)),
                     min_size=1, max_size=60)


@pytest.mark.parametrize("renderer", [blocks.MemoryMdBlocks, blocks.PlainMemoryMd])
@settings(max_examples=80, deadline=None)
@given(st.integers(0, 90), CACHE_OPS)
def test_memory_md_from_the_kept_blocks_is_render_memory_md(renderer, preset, ops):
    """The cache keeps MEMORY.md's lines encoded and joined in blocks (a change re-joins
    one block; a key coming or going moves the blocks after it). Over any run of sets,
    deletes and expiries across block boundaries, its bytes are render_memory_md's —
    and so are those of the plain renderer, which keeps nothing."""
    cache = follow.PreferenceCache(renderer())
    profile = user.UserProfile(user_scope="scope", name="Ali")
    revisions = {}

    def put(key, value, expires):
        revisions[key] = revisions.get(key, 0) + 1
        cache.put(user.Preference(key, value, revisions[key], at(0), expires_at=expires,
                                  deleted_at=at(0) if value is None else None))

    for k in range(preset):  # a state decoded before any projection (no lines kept yet)
        put(f"k{k:03d}", f"preset {k}", None)
    for step, (op, k, expires, hours) in enumerate(ops):
        put(f"k{k:03d}", None if op == "delete" else f"v{step}",
            None if op == "delete" or expires is None else at(expires))
        as_of = at(hours)
        expected = render_memory_md("scope", profile, active_at(cache.state, as_of), as_of)
        assert cache.render("scope", profile, as_of) == expected.encode("utf-8")


def test_the_block_cache_is_optional(tmp_path, monkeypatch):
    """``UserMemory.memory_md_renderer`` is the seam: without the block cache every file
    holds the same bytes after the same writes."""
    def run(root):
        memory = make(root, clock=FixedClock(at(0)))
        for k in range(40):
            memory.set_preference(f"k{k:02d}", f"v{k}", expires_at=at(2) if k % 7 else None)
        memory.delete_preference("k03", deleted_at=at(1))
        memory.set_preference("k05", "changed", updated_at=at(1))
        memory.refresh_memory_md(at(3))
        return every_file(memory)

    kept = run(tmp_path / "blocks")
    monkeypatch.setattr(UserMemory, "memory_md_renderer", blocks.PlainMemoryMd)
    assert run(tmp_path / "plain") == kept



def test_following_a_change_then_deleting_the_last_key_renders_none(tmp_path):
    """An instance that projected, then followed another's change of its only key from
    the log (no projection in between), then deletes that key: MEMORY.md shows none.
    (The change left its block marked for re-joining; the delete removed that block.)"""
    clock = FixedClock(at(0))
    first, second = make(tmp_path, clock=clock), make(tmp_path, clock=clock)
    first.set_preference("a", "x", updated_at=at(1))
    second.set_preference("a", "y", updated_at=at(2))
    assert first.delete_preference("a", deleted_at=at(3)).status == "deleted"
    assert first.memory_md_path.read_text(encoding="utf-8").endswith("- (none active)\n")
