# Generated from notebooks/s12_remote_recall.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""s12 from scratch: remote memory and query-scoped recall, in one listing.

A stored record is durable evidence with an owner (``user_scope``) and a source; a recall
hit is a view of one record, computed for one query. The records live in an append-only
JSONL file (one ``fsync`` per append, a torn last line ignored and cut off). Recall runs
five stages over a plain list of those records: normalize → candidate → score → stable
rank → render. Nothing else: no index, no cache, no pruning — every recall reads every
record. ``labmem.recall`` is the production layer; it is held equal to this module by one
contract suite (``labmem.exercises.suites.s12``), and its reference backend
(``labmem.recall.reference``) runs the stages of this module.
"""

import hashlib
import html
import json
import os
import re
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

CONVERSATION, PROFILE = "conversation", "profile"


@dataclass(frozen=True)
class MemorySource:
    """Where a record came from: every hit carries it to the prompt as provenance."""

    source_id: str
    source_type: str
    title: str
    captured_at: datetime  # when the source happened: recency counts from here


@dataclass(frozen=True)
class StoredMemory:
    """One durable record. ``stored_at`` (when it entered the store) is not ``captured_at``."""

    memory_id: str
    user_scope: str
    kind: str  # CONVERSATION (searched by recall) or PROFILE (loaded at session start)
    content: str
    summary: str
    source: MemorySource
    stored_at: datetime


def scope_of(user_id: str) -> str:
    """The owner's scope: a digest, so the user id itself is never written to disk."""
    return hashlib.sha256(f"labmem-scope:v1:{user_id}".encode()).hexdigest()[:16]


def utc_text(moment: datetime) -> str:
    """ISO-8601 in UTC with a ``Z``, the one way a time is written down."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def utc_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class RemoteMemoryError(Exception):
    """Something the store refuses on purpose."""


class ScopeError(RemoteMemoryError):
    """A record of another user: recall never crosses users."""


class DuplicateError(RemoteMemoryError):
    """Records are immutable: a stored memory_id is never written twice."""


class CorruptionError(RemoteMemoryError):
    """A complete line that cannot be trusted: the whole file is refused, with its line."""


def to_line(record: StoredMemory) -> str:
    """One JSON object per line; times as UTC text; non-ASCII text kept as it is."""
    return json.dumps(asdict(record), ensure_ascii=False, default=utc_text) + "\n"


def from_line(line: str) -> StoredMemory:
    data = json.loads(line)
    source = dict(data["source"], captured_at=utc_time(data["source"]["captured_at"]))
    return StoredMemory(**dict(data, source=MemorySource(**source),
                               stored_at=utc_time(data["stored_at"])))


class RemoteMemoryStore:
    """One user's records in one append-only JSONL file."""

    def __init__(self, path: Path, user_scope: str) -> None:
        self.path, self.user_scope = Path(path), user_scope

    def _complete_text(self) -> str:
        """The file up to its last newline: an unterminated last line is a torn write."""
        if not self.path.exists():
            return ""
        data = self.path.read_bytes()
        return data[:data.rfind(b"\n") + 1].decode("utf-8")

    def read_all(self) -> list[StoredMemory]:
        """Every record, in storage order; a bad line or a foreign scope refuses the file."""
        records = []
        # split on "\n" only: str.splitlines() would also split inside a string (U+2028)
        for number, line in enumerate(self._complete_text().split("\n")[:-1], start=1):
            try:
                record = from_line(line)
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptionError(f"{self.path.name} line {number}: {exc}") from None
            if record.user_scope != self.user_scope:
                raise ScopeError(f"{self.path.name} line {number}: record belongs to "
                                 f"user scope {record.user_scope!r}, not {self.user_scope!r}")
            records.append(record)
        return records

    def append(self, record: StoredMemory) -> StoredMemory:
        """Check, repair a torn tail, write one line, fsync: durable when this returns."""
        if record.user_scope != self.user_scope:
            raise ScopeError(f"record {record.memory_id!r} is for scope {record.user_scope!r}")
        if any(old.memory_id == record.memory_id for old in self.read_all()):
            raise DuplicateError(f"memory_id {record.memory_id!r} is already stored")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            os.truncate(self.path, len(self._complete_text().encode("utf-8")))
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, to_line(record).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return record


CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
                 "\U0002a700-\U0002ebef\U0002f800-\U0002fa1f\U00030000-\U0003134f]")
KANA = re.compile("[\u3041-\u3096\u3099\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff"
                  "\u31f0-\u31ff\U0001b000-\U0001b16f]")
ASCII_WORD = re.compile(r"[a-z0-9]+")


def normalize_text(text: str) -> str:
    """NFKC + casefold + whitespace collapse: fullwidth, case and spacing stop mattering."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if not folded.isascii():  # casefolding can undo NFKC (İ → i + a combining dot)
        folded = unicodedata.normalize("NFKC", folded)
    return " ".join(folded.split())


def char_class(char: str) -> str | None:
    """'cjk' or 'kana' (no spaces between words), 'word', 'mark', or None (a separator)."""
    if CJK.match(char):
        return "cjk"
    if KANA.match(char):
        return "kana"
    if char.isalnum():
        return "word"
    return "mark" if unicodedata.category(char).startswith("M") else None


def runs(text: str):
    """(class, run) for each run of one class; combining marks stay inside their word."""
    kind, run = None, ""
    for char in text:
        cls = char_class(char)
        if kind == "word" and unicodedata.category(char).startswith("M"):
            cls = "word"  # any combining mark, even a kana voicing mark, extends a word
        if cls == kind and run:
            run += char
            continue
        if run:
            yield kind, run
        kind, run = (cls, char) if cls in ("cjk", "kana", "word") else (None, "")
    if run:
        yield kind, run


def search_terms(text: str) -> Counter:
    """How often each term occurs: words of every script, and for each run of CJK
    characters or kana its overlapping two-character bigrams (one character: itself)."""
    normalized = normalize_text(text)
    if normalized.isascii():  # the common case, one regex
        return Counter(ASCII_WORD.findall(normalized))
    counts = Counter()
    for kind, run in runs(normalized):
        if kind == "word" or len(run) == 1:
            counts[run] += 1
        else:
            counts.update(run[i:i + 2] for i in range(len(run) - 1))
    return counts


def record_terms(record: StoredMemory) -> Counter:
    """A record is searchable by its source title, its summary and its content."""
    return search_terms("\n".join((record.source.title, record.summary, record.content)))


@dataclass(frozen=True)
class RecallQuery:
    """One recall request, normalized once; every later stage uses only ``terms``."""

    query_id: str
    text: str
    normalized_text: str
    terms: tuple[str, ...]
    user_scope: str
    limit: int
    issued_at: datetime


def normalize_recall_query(text: str, *, user_scope: str, limit: int,
                           issued_at: datetime) -> RecallQuery:
    """Stage 1: readable text, normalized text, sorted unique terms — or a refusal."""
    readable = " ".join(text.split())
    if not readable:
        raise ValueError("text: must not be empty; describe the past information you need")
    normalized = normalize_text(readable)
    terms = tuple(sorted(search_terms(normalized)))
    if not terms:
        raise ValueError(f"text: {readable!r} has no searchable terms; recall never "
                         "falls back to 'everything'")
    if not 1 <= limit <= 10:
        raise ValueError(f"limit: {limit} is not between 1 and 10")
    basis = "\x1f".join((user_scope, normalized, utc_text(issued_at)))
    query_id = "query-" + hashlib.sha256(basis.encode()).hexdigest()[:12]
    return RecallQuery(query_id, readable, normalized, terms, user_scope, limit, issued_at)


@dataclass(frozen=True)
class RecallCandidate:
    """A conversation record sharing at least one term with the query; no score yet."""

    query_id: str
    record: StoredMemory
    searchable_terms: tuple[str, ...]
    matched_terms: tuple[str, ...]  # in query order
    captured_at: datetime
    term_counts: dict = field(default_factory=dict)  # matched term → occurrences
    document_length: int = 0  # all its term occurrences (what s12b's BM25 normalizes by)


def build_recall_candidates(query: RecallQuery, records) -> list[RecallCandidate]:
    """Stage 2: every record's scope re-checked; profiles skipped; any shared term."""
    candidates = []
    for record in records:
        if record.user_scope != query.user_scope:
            raise ScopeError(f"record {record.memory_id!r} belongs to user scope "
                             f"{record.user_scope!r}, not the query's {query.user_scope!r}; "
                             "recall never crosses users")
        if record.kind != CONVERSATION:
            continue
        counts = record_terms(record)
        matched = tuple(term for term in query.terms if term in counts)
        if matched:
            candidates.append(RecallCandidate(
                query.query_id, record, tuple(sorted(counts)), matched,
                record.source.captured_at, {term: counts[term] for term in matched},
                sum(counts.values())))
    return candidates


LEXICAL_WEIGHT, RECENCY_WEIGHT = 0.85, 0.15  # matching dominates, time separates
RECENCY_SCALE_DAYS = 30.0
DECIMALS = 6  # every part is rounded as it is shown, then added


@dataclass(frozen=True)
class RecallScoreBreakdown:
    """Why a candidate scored what it did: every input and both contributions."""

    matched_terms: tuple[str, ...]
    query_term_count: int
    lexical_coverage: float
    recency: float
    lexical_contribution: float
    recency_contribution: float
    total: float
    age_days: float
    term_contributions: dict  # matched term → its share of the lexical part


def recency_weight(age_days: float) -> float:
    """1 today, 1/2 after 30 days, 1/3 after 60: a slow hyperbolic decay."""
    return 1.0 / (1.0 + max(0.0, age_days) / RECENCY_SCALE_DAYS)


def score_recall_candidate(query: RecallQuery, candidate: RecallCandidate, *,
                           as_of: datetime) -> RecallScoreBreakdown:
    """Stage 3: 0.85 × coverage + 0.15 × recency, every part in the breakdown."""
    age = max(0.0, (as_of - candidate.captured_at).total_seconds() / 86_400)
    coverage = round(len(candidate.matched_terms) / len(query.terms), DECIMALS)
    recency = round(recency_weight(age), DECIMALS)
    lexical_part = round(LEXICAL_WEIGHT * coverage, DECIMALS)
    recency_part = round(RECENCY_WEIGHT * recency, DECIMALS)
    share = round(LEXICAL_WEIGHT / len(query.terms), DECIMALS)
    return RecallScoreBreakdown(
        candidate.matched_terms, len(query.terms), coverage, recency, lexical_part,
        recency_part, round(lexical_part + recency_part, DECIMALS), round(age, DECIMALS),
        {term: share for term in candidate.matched_terms})


@dataclass(frozen=True)
class RecallScope:
    """The boundary a hit was found in: whose records, and which kind."""

    user_scope: str
    memory_kind: str


@dataclass(frozen=True)
class RecallHit:
    """A per-query view of one stored record; never written back as a memory."""

    query_id: str
    memory_id: str
    rank: int
    snippet: str
    scope: RecallScope
    provenance: MemorySource
    score_breakdown: RecallScoreBreakdown


def rank_key(candidate: RecallCandidate, breakdown: RecallScoreBreakdown) -> tuple:
    """total ↓, coverage ↓, captured_at ↓, memory_id ↑: a total order, so ties are stable."""
    return (-breakdown.total, -breakdown.lexical_coverage,
            -candidate.captured_at.timestamp(), candidate.record.memory_id)


def snippet_of(record: StoredMemory) -> str:
    return record.summary if record.summary.strip() else record.content[:240]


def stable_rank_recall_candidates(query: RecallQuery, candidates, *,
                                  as_of: datetime) -> list[RecallHit]:
    """Stage 4: score every candidate, sort by rank_key, keep query.limit, rank from 1."""
    scored = [(c, score_recall_candidate(query, c, as_of=as_of)) for c in candidates]
    scored.sort(key=lambda pair: rank_key(*pair))
    return [RecallHit(query.query_id, c.record.memory_id, rank, snippet_of(c.record),
                      RecallScope(c.record.user_scope, c.record.kind), c.record.source, b)
            for rank, (c, b) in enumerate(scored[:query.limit], start=1)]


@dataclass(frozen=True)
class RecallResult:
    """The hits, plus the counts that explain an empty or a short result."""

    query: RecallQuery
    hits: list[RecallHit]
    searched_records: int  # conversation records examined
    candidate_records: int  # of them, those sharing a term with the query
    empty_reason: str | None


def recall_records(query: RecallQuery, records, *, as_of: datetime) -> RecallResult:
    """Stages 2–4 over a plain list of records: read everything, score the overlap."""
    records = list(records)
    candidates = build_recall_candidates(query, records)
    hits = stable_rank_recall_candidates(query, candidates, as_of=as_of)
    searched = sum(1 for record in records if record.kind == CONVERSATION)
    return RecallResult(query, hits, searched, len(candidates),
                        None if hits else "no_matching_terms")


def recall(store: RemoteMemoryStore, text: str, *, limit: int = 5,
           as_of: datetime) -> RecallResult:
    """Stages 1–4 for one user's store: recall only reads, so a hit is never stored."""
    query = normalize_recall_query(text, user_scope=store.user_scope, limit=limit,
                                   issued_at=as_of)
    return recall_records(query, store.read_all(), as_of=as_of)


def escape(text: str) -> str:
    """Markup escaped; a backslash doubled; line breaks and other invisible characters
    written as \\uXXXX: stored text can neither close an element nor start a line."""
    text = html.escape(text, quote=True).replace("\\", "\\\\")
    return "".join(c if c.isprintable() or c == " " else
                   (f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
                   for c in text)


def render_recalled_context(result: RecallResult) -> str:
    """Stage 5: the hits as a <recalled_context> block, one item per line; "" if none."""
    if not result.hits:
        return ""
    q = result.query
    lines = [f'<recalled_context query_id="{escape(q.query_id)}" normalized_query='
             f'"{escape(q.normalized_text)}" user_scope="{escape(q.user_scope)}">']
    for hit in result.hits:
        b, p = hit.score_breakdown, hit.provenance
        lines += [
            f'  <hit rank="{hit.rank}" memory_id="{escape(hit.memory_id)}" user_scope='
            f'"{escape(hit.scope.user_scope)}" memory_kind="{escape(hit.scope.memory_kind)}">',
            f'    <score total="{b.total:.6f}" lexical_coverage="{b.lexical_coverage:.6f}" '
            f'recency="{b.recency:.6f}" lexical_contribution="{b.lexical_contribution:.6f}" '
            f'recency_contribution="{b.recency_contribution:.6f}"/>',
            f'    <provenance source_id="{escape(p.source_id)}" source_type='
            f'"{escape(p.source_type)}" title="{escape(p.title)}" '
            f'captured_at="{utc_text(p.captured_at)}"/>',
            f"    <snippet>{escape(hit.snippet)}</snippet>",
            "  </hit>",
        ]
    return "\n".join(lines + ["</recalled_context>"])
