"""Benchmark: s09 transcript appends and s11 preference writes as the data grows.

Transcript (the claim: **per-append cost stays flat**). For each size (default 1,000,
10,000 and 100,000 events) the script writes a valid session file of that many
events, opens a fresh :class:`Transcript` on it (the "open" column: decode every
line once), then times appends interleaved record by record with two peers:

* ``bare``   — the same line bytes, ``os.write`` + ``os.fsync`` on one open descriptor:
  the physical limit of this disk for one durable line;
* ``sqlite`` — one ``INSERT`` + ``COMMIT`` per event, ``synchronous=FULL``, into a table
  whose PRIMARY KEY is the sequence number (the peer of the envelope check).

It also times ``replay_state(max_items=50)`` on the freshly opened transcript (the
"replay 50" column, median of ``--replays`` calls) next to the floor of any fold that
walks the history: a bare loop over the decoded records that counts their types. The
claim under test: **replay after open costs O(window), not O(history)** — the 100k-event
figure at most ×2 the 1k-event one. ``replay_state()`` with its default window of 1,000
messages is timed once after the appends, and bytes read from disk per append are
counted (0: an append never re-reads the file).

User memory: ``set_preference`` at 10 / 100 / 1,000 keys, timed against two peers: one
fsync'd ``O_APPEND`` write of a line of the same size as a revision line (the physical limit
of one durable change), interleaved call by call with ``set_preference``, and — in a loop of
its own afterwards — a bare write + fsync + rename of a file the size of the preferences
snapshot (interleaved, its freed blocks and rename slowed the call timed right after it, a
``set_preference``, by 80–230 µs at 1,000 keys in five runs, the append by at most 17).
The claim under test: **a preference write costs about as much as a few durable appends,
whatever the number of keys** — at 1,000 keys at most ×3 one fsync'd append. "open ms" is a
fresh ``UserMemory`` reading every key. ``--dir`` puts the temporary directory elsewhere
than the system's.

Run: ``python bench/transcript_user.py`` (about half a minute), ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from benchlib import (  # bench/ is on sys.path when this runs as a script
    COUNT,
    MS,
    RATIO,
    RESULTS_DIR,
    US,
    Columns,
    Timing,
    progress,
    render_table,
    seconds_since,
    write_csv,
)

from labmem.core.clock import SteppingClock, format_timestamp
from labmem.core.storage import encode_json_line
from labmem.transcript import SCHEMA_VERSION, Transcript
from labmem.user import UserMemory

START = "2026-08-01T00:00:00Z"
FLAT_THRESHOLD = 1.5
MS2 = "{:,.2f}"


@dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...]
    appends: int
    replays: int
    key_counts: tuple[int, ...]
    writes: int
    csv_path: Path | None
    directory: Path | None


def parse_args(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--replays", type=int, default=20, help="replay_state calls per size")
    parser.add_argument("--keys", default="10,100,1000")
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    parser.add_argument("--csv", type=Path, default=RESULTS_DIR / "transcript_user.csv")
    parser.add_argument("--no-csv", action="store_true")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the temporary directory goes (default: the system's, "
                             "/tmp here); creating a file costs more in a busy directory")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.appends, args.keys, args.writes = "200,1000", 50, "10,50", 20
        args.replays = 3
    return Settings(tuple(int(s) for s in args.sizes.split(",")), args.appends, args.replays,
                    tuple(int(k) for k in args.keys.split(",")), args.writes,
                    None if args.no_csv else args.csv, args.dir)


# -- transcript ------------------------------------------------------------------------


def event(n: int) -> dict:
    """A deterministic mix of the event types a session holds."""
    if n % 4 == 1:
        return {"type": "function_call", "call_id": f"call-{n}", "name": "bash",
                "arguments": {"cmd": f"grep -n memory file{n}.py"}}
    if n % 4 == 2:
        return {"type": "function_call_result", "call_id": f"call-{n - 1}",
                "output": f"file{n}.py:{n}: memory layer " * 4}
    role = "user" if n % 4 == 0 else "assistant"
    return {"type": "message", "role": role, "content": f"Message {n} about the memory layers."}


def write_session(path: Path, size: int, clock: SteppingClock) -> None:
    """A valid session file with ``size`` events, written in one go (the bulk load)."""
    with open(path, "wb") as handle:
        for sequence in range(1, size + 1):
            record = {"schema_version": SCHEMA_VERSION, "sequence": sequence,
                      "session_id": path.stem, "event_id": f"transcript:{path.stem}:{sequence}",
                      "recorded_at": format_timestamp(clock.now()), **event(sequence - 1)}
            handle.write(encode_json_line(record))


def fold_floor(records: list[dict]) -> int:
    """The floor of any fold over the history: touch every decoded record once."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record["type"]] = counts.get(record["type"], 0) + 1
    return sum(counts.values())


def bench_transcript(size: int, appends: int, replays: int, folder: Path) -> dict:
    folder.mkdir(parents=True)
    clock = SteppingClock(START)
    path = folder / "session-1.jsonl"
    write_session(path, size, clock)
    started = time.perf_counter()
    transcript = Transcript(path, clock=clock)
    assert len(transcript) == size
    open_ms = seconds_since(started) * 1e3
    replay50 = []
    for _ in range(replays):
        t0 = time.perf_counter()
        window = transcript.replay_state(max_items=50)
        replay50.append(seconds_since(t0))
    assert len(window.messages) <= 50 and window.next_sequence == size + 1
    records = [json.loads(raw) for raw in path.read_bytes().split(b"\n")[:-1]]
    floor = []
    for _ in range(max(3, replays // 4)):
        t0 = time.perf_counter()
        assert fold_floor(records) == size
        floor.append(seconds_since(t0))
    del records

    db = sqlite3.connect(folder / "events.db", isolation_level=None)
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE events (sequence INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    db.execute("BEGIN")
    db.executemany("INSERT INTO events VALUES (?, ?)",
                   ((n, json.dumps(event(n - 1))) for n in range(1, size + 1)))
    db.execute("COMMIT")
    bare_fd = os.open(folder / "bare.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    ours, bare, peer = [], [], []
    bytes_before = transcript.bytes_read
    try:
        for i in range(appends):
            body = event(size + i)
            if body["type"] == "function_call_result":  # answer the call appended just before
                body["call_id"] = f"call-{size + i - 1}"
            t0 = time.perf_counter()
            record = transcript.append(body)
            ours.append(seconds_since(t0))
            line = encode_json_line(record)
            t0 = time.perf_counter()
            os.write(bare_fd, line)
            os.fsync(bare_fd)
            bare.append(seconds_since(t0))
            t0 = time.perf_counter()
            db.execute("BEGIN")
            db.execute("INSERT INTO events VALUES (?, ?)", (record["sequence"], json.dumps(body)))
            db.execute("COMMIT")
            peer.append(seconds_since(t0))
    finally:
        os.close(bare_fd)
        db.close()
    bytes_read = transcript.bytes_read - bytes_before
    t0 = time.perf_counter()
    state = transcript.replay_state()
    replay_ms = seconds_since(t0) * 1e3
    assert state.next_sequence == size + appends + 1
    o, b, p = Timing.of(ours), Timing.of(bare), Timing.of(peer)
    r50, fl = Timing.of(replay50), Timing.of(floor)
    return {"events": size, "open_ms": open_ms, "replay50_p50_ms": r50.p50 / 1e3,
            "fold_floor_ms": fl.p50 / 1e3, "replay50_x_floor": r50.p50 / fl.p50,
            "append_mean_us": o.mean, "append_p50_us": o.p50,
            "append_p95_us": o.p95, "bare_mean_us": b.mean, "sqlite_mean_us": p.mean,
            "append_x_bare": o.mean / b.mean, "append_x_sqlite": o.mean / p.mean,
            "bytes_read_per_append": bytes_read / appends, "replay_ms": replay_ms}


TRANSCRIPT_TABLE: Columns = [
    ("session", [("events", "events", COUNT), ("open ms", "open_ms", MS)]),
    ("replay_state(50) after open", [("p50 ms", "replay50_p50_ms", MS2),
                                     ("fold floor ms", "fold_floor_ms", MS2),
                                     ("÷ floor", "replay50_x_floor", RATIO)]),
    ("labmem append µs", [("mean", "append_mean_us", US), ("p50", "append_p50_us", US),
                          ("p95", "append_p95_us", US)]),
    ("peers µs", [("bare", "bare_mean_us", US), ("sqlite", "sqlite_mean_us", US)]),
    ("labmem ÷", [("bare", "append_x_bare", RATIO), ("sqlite", "append_x_sqlite", RATIO)]),
    ("bytes read", [("/append", "bytes_read_per_append", COUNT)]),
    ("replay(1000)", [("ms", "replay_ms", MS2)]),
]


# -- user memory -----------------------------------------------------------------------


def revision_line(memory: UserMemory, key: str, value: str) -> bytes:
    """A line the size of one revision record (the append peer writes it)."""
    return encode_json_line({"user_scope": memory.user_scope, "generation": 1, "key": key,
                             "value": value, "revision": 2, "updated_at": START,
                             "expires_at": None, "source_event_id": None, "deleted_at": None})


def bench_user(keys: int, writes: int, folder: Path) -> dict:
    memory = UserMemory(folder, user_id="bench", clock=SteppingClock(START))
    for k in range(keys):
        memory.set_preference(f"key.{k}", f"value {k}")
    snapshot_size = memory.preferences_path.stat().st_size
    snapshot = b"x" * snapshot_size
    t0 = time.perf_counter()
    assert len(UserMemory(folder, user_id="bench").list_preferences()) == keys
    open_ms = seconds_since(t0) * 1e3
    append_fd = os.open(folder / "bare.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    ours, appended, bare = [], [], []
    try:  # the two sides of the claim, interleaved call by call
        for i in range(writes):
            key, value = f"key.{i % keys}", f"changed {i}"
            t0 = time.perf_counter()
            memory.set_preference(key, value)
            ours.append(seconds_since(t0))
            line = revision_line(memory, key, value)
            t0 = time.perf_counter()
            os.write(append_fd, line)
            os.fsync(append_fd)
            appended.append(seconds_since(t0))
    finally:
        os.close(append_fd)
    for _ in range(writes):  # apart: its freed blocks and rename slow whatever comes next
        t0 = time.perf_counter()
        temp = folder / "bare.json.tmp"
        with open(temp, "wb") as handle:
            handle.write(snapshot)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, folder / "bare.json")
        bare.append(seconds_since(t0))
    o, a, b = Timing.of(ours), Timing.of(appended), Timing.of(bare)
    return {"keys": keys, "snapshot_kib": snapshot_size / 1024, "open_ms": open_ms,
            "write_mean_us": o.mean, "write_p50_us": o.p50, "write_p95_us": o.p95,
            "append_mean_us": a.mean, "append_p50_us": a.p50, "bare_mean_us": b.mean,
            "write_x_append": o.p50 / a.p50, "write_x_append_mean": o.mean / a.mean,
            "write_x_bare": o.mean / b.mean}


USER_TABLE: Columns = [
    ("preferences", [("keys", "keys", COUNT), ("snapshot KiB", "snapshot_kib", MS),
                     ("open ms", "open_ms", MS2)]),
    ("set_preference µs", [("mean", "write_mean_us", US), ("p50", "write_p50_us", US),
                           ("p95", "write_p95_us", US)]),
    ("fsync'd append µs", [("mean", "append_mean_us", US), ("p50", "append_p50_us", US)]),
    ("bare snapshot", [("µs", "bare_mean_us", US)]),
    ("labmem ÷", [("append p50", "write_x_append", RATIO),
                  ("append mean", "write_x_append_mean", RATIO),
                  ("snapshot", "write_x_bare", RATIO)]),
]
REPLAY_TARGET, WRITE_TARGET = 2.0, 3.0


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="labmem-bench-", dir=settings.directory) as tmp:
        transcript_rows, user_rows = [], []
        for size in settings.sizes:
            progress(f"transcript: {size:,} events")
            transcript_rows.append(bench_transcript(size, settings.appends, settings.replays,
                                                    Path(tmp) / f"t{size}"))
        for keys in settings.key_counts:
            progress(f"user memory: {keys:,} keys")
            user_rows.append(bench_user(keys, settings.writes, Path(tmp) / f"u{keys}"))
    transcripts, users = pd.DataFrame(transcript_rows), pd.DataFrame(user_rows)
    print(f"\nTranscript: {settings.appends:,} appends per size (one fsync'd event each)")
    print(render_table(transcripts, TRANSCRIPT_TABLE))
    small, large = transcripts.iloc[0], transcripts.iloc[-1]
    ratio = large["append_p50_us"] / small["append_p50_us"]
    verdict = "stayed flat" if ratio < FLAT_THRESHOLD else "did NOT stay flat"
    print(f"\nPer-append cost {verdict}: median {large['append_p50_us']:,.0f} µs at "
          f"{int(large['events']):,} events vs {small['append_p50_us']:,.0f} µs at "
          f"{int(small['events']):,} (×{ratio:.2f}; flat means < ×{FLAT_THRESHOLD}).")
    replay = large["replay50_p50_ms"] / small["replay50_p50_ms"]
    print(f"replay_state(max_items=50) after open: {large['replay50_p50_ms']:,.2f} ms at "
          f"{int(large['events']):,} events vs {small['replay50_p50_ms']:,.2f} ms at "
          f"{int(small['events']):,} (×{replay:.2f}; target ≤ ×{REPLAY_TARGET:g}: "
          f"{'met' if replay <= REPLAY_TARGET else 'NOT met'}).")
    print(f"\nUser memory: {settings.writes:,} changing set_preference calls per size, each "
          "beside one fsync'd append of a line; as many bare snapshot rewrites apart")
    print(render_table(users, USER_TABLE))
    most = users.iloc[-1]
    print(f"\nset_preference at {int(most['keys']):,} keys: p50 {most['write_p50_us']:,.0f} µs "
          f"= ×{most['write_x_append']:.2f} one fsync'd append ({most['append_p50_us']:,.0f} µs; "
          f"means ×{most['write_x_append_mean']:.2f}; target ≤ ×{WRITE_TARGET:g}: "
          f"{'met' if most['write_x_append'] <= WRITE_TARGET else 'NOT met'}).")
    if settings.csv_path is not None:
        write_csv(pd.concat([transcripts.assign(part="transcript"), users.assign(part="user")]),
                  settings.csv_path)
    print(f"Total run time: {seconds_since(started):.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
