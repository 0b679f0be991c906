"""The shared core every layer builds on; it imports no layer.

    clock       injectable clocks and the one timestamp format
    errors      one exception hierarchy under LabmemError
    provenance  MemorySource (where a memory came from) and scope_digest
    text        normalization, search terms, estimate_tokens
    validation  require_text / require_int: refuse what cannot be stored, naming the field
    storage     append-only JSONL logs, atomic snapshots, file locks
    metrics     recall@k, precision@k, hit@k, reciprocal rank

Import from the module that owns a name (``from labmem.core.clock import FixedClock``), so
a reader always knows where to look.
"""
