"""A/B two versions of the recall library on the same prepared stores.

``recall_scale.py --cold CACHE`` prepares stores (JSONL with its sidecar, SQLite) under
``CACHE/seed7/n<size>``; this script opens one of them with whichever ``labmem`` is first
on ``sys.path`` and times every query of ``queries.json`` three times in one process: the
first pass reads each term's postings for the first time, the next two are steady. Run it
alternately with the two versions on ``PYTHONPATH`` (the machine drifts between
processes; alternating spreads the drift over both)::

    for v in /tmp/before /work/main /tmp/before /work/main; do
        PYTHONPATH=$v python bench/recall_ab.py CACHE/seed7/n10000 sqlite bm25
    done

Prints one JSON line: which library, the store kind, the scorer, each pass's median µs.
The comparison of the fast backend before and after it moved into sibling modules is in
``bench/results/recall_backends.md``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from labmem.core.clock import FixedClock
from labmem.recall import RecallEngine, RemoteMemoryStore, SqliteMemoryStore

USER_ID = "bench"  # recall_scale.py's
NOW = "2026-08-01T12:00:00Z"
PASSES = 3


def main(argv: list[str]) -> int:
    folder, kind, scorer = Path(argv[0]), argv[1], argv[2]
    queries = [q["text"] for q in json.loads((folder.parent / "queries.json").read_text())]
    clock = FixedClock(NOW)
    store = (SqliteMemoryStore(folder / "records.sqlite", user_id=USER_ID, clock=clock)
             if kind == "sqlite" else
             RemoteMemoryStore(folder / "records.jsonl", user_id=USER_ID, clock=clock))
    engine = RecallEngine(store, scorer=scorer)
    medians = []
    for _ in range(PASSES):
        samples = []
        for query in queries:
            start = time.perf_counter()
            engine.recall(query, limit=10)
            samples.append(time.perf_counter() - start)
        medians.append(round(statistics.median(samples) * 1e6))
    import labmem

    print(json.dumps({"library": str(Path(labmem.__file__).parent.parent), "kind": kind,
                      "scorer": scorer, "p50_us": medians}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
