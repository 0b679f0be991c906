"""The shared core every layer builds on; it imports no layer.

    clock       injectable clocks and the one timestamp format
    errors      one exception hierarchy under LabmemError
    provenance  MemorySource (where a memory came from), scope_digest, the opaque-id rule
    text        normalization, search terms, estimate_tokens
    validation  require_text / require_int / require_json / parse_json: refuse what cannot
                be stored (lone surrogates, JSON nested past MAX_JSON_DEPTH), naming the field
    storage     append-only JSONL logs, atomic snapshots, file locks
    locking     the cross-process advisory lock those logs take (flock / msvcrt)
    metrics     recall@k, precision@k, hit@k, reciprocal rank
    render      one renderer for every prompt block: stored text escaped so it can never
                produce a delimiter, header, attribute or status marker; fields validated

Import from the module that owns a name (``from labmem.core.clock import FixedClock``), so
a reader always knows where to look.
"""
