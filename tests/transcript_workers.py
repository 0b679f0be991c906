"""Child-process code for the s09 transcript tests (importable under 'spawn')."""

from __future__ import annotations


def append_transcript_events(path, worker, count, start):
    """One of several processes appending to the same session at once."""
    from labmem.transcript import Transcript

    transcript = Transcript(path)
    start.wait()
    for i in range(count):
        transcript.append({"type": "message", "role": "user", "content": f"w{worker} #{i}"})
