"""s09 transcript: session evidence is append-only; runtime state is derived.

A :class:`Transcript` is one JSONL file per session. Every event the agent sees or
does (a message, a tool call and its result, a file snapshot, a title) is appended
once, with an envelope that numbers it, and is never rewritten. What a model needs
next — the messages, the title, the latest file snapshots — is *folded* from the
events by :meth:`Transcript.replay_state` and never written back.

Memory does not copy the transcript: :meth:`Transcript.select_memory_candidate`
returns a small candidate that *points* at one event (its id becomes the source id)
with a summary and the reason it was selected.

The layer in four modules:

* :mod:`labmem.transcript.events` — the event types, the envelope, the errors, and the
  validation every event goes through;
* :mod:`labmem.transcript.replay` — the pure message fold :func:`replay_window`, and the
  :class:`ReplayFold` seam a transcript folds through (:class:`PlainFold` refolds all);
* :mod:`labmem.transcript.incremental` — one optimization, :class:`IncrementalFold`: the
  same fold kept as events arrive, so a replay costs the window, not the session;
* :mod:`labmem.transcript.log` — :class:`Transcript`, which owns the file and the lock.
"""

from labmem.transcript.events import (
    ENVELOPE_FIELDS,
    EVENT_TYPES,
    MAX_REASON_CHARS,
    MAX_SUMMARY_CHARS,
    MESSAGE_ROLES,
    SCHEMA_VERSION,
    SELECTABLE_TYPES,
    MemorySelectionError,
    TranscriptCorruptionError,
    TranscriptError,
    TranscriptValidationError,
)
from labmem.transcript.incremental import IncrementalFold
from labmem.transcript.log import ReplayState, Transcript, TranscriptMemoryCandidate
from labmem.transcript.replay import (
    PlainFold,
    ReplayFold,
    ReplayWindow,
    replay_window,
)

__all__ = [
    "Transcript", "ReplayState", "ReplayWindow", "TranscriptMemoryCandidate", "TranscriptError",
    "TranscriptValidationError", "TranscriptCorruptionError", "MemorySelectionError",
    "EVENT_TYPES", "SCHEMA_VERSION", "replay_window",
    "ReplayFold", "PlainFold", "IncrementalFold",
    "ENVELOPE_FIELDS", "MESSAGE_ROLES", "SELECTABLE_TYPES", "MAX_SUMMARY_CHARS",
    "MAX_REASON_CHARS",
]
