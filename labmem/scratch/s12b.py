# Generated from notebooks/s12b_choosing_a_ranker.ipynb
# by tools/scratch.py: edit the chapter's marked cells, not this file.
"""s12b from scratch: an analyzer, an inverted index and BM25, on top of s12's stages.

s12 ranked by reading every record and scoring the share of query terms it holds. This
module keeps s12's records, its query (stage 1), its rank order (stage 4) and its result,
and changes what is between them: an *analyzer* decides which terms count, an *inverted
index* (term → postings) finds the candidates without reading every record, and *BM25*
scores them, with each term's part in the breakdown. At the end, dense recall by hand: the
cosine of two embedding vectors, and every record ranked by it. Nothing else: no arrays,
no cache, no pruning. ``labmem.recall`` is the production layer (packed postings, a vectorized
estimate, MaxScore pruning, a persisted index); one contract suite
(``labmem.exercises.suites.s12b``) holds the two equal, and the library's reference
backend (``RecallEngine(store, scorer="bm25", backend="reference")``) runs this module.
"""

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from labmem.scratch.s12 import (  # noqa: F401 (the records, re-exported for the chapter)
    CONVERSATION,
    DECIMALS,
    MemorySource,
    RecallCandidate,
    RecallHit,
    RecallResult,
    RecallScope,
    RecallScoreBreakdown,
    ScopeError,
    StoredMemory,
    normalize_recall_query,
    rank_key,
    search_terms,
    snippet_of,
)


@dataclass(frozen=True)
class Analyzer:
    """Which terms a scorer counts: each surface term, unless it is a stop word, stemmed."""

    stop_words: frozenset = frozenset()
    stem: Callable[[str], str] | None = None  # None: keep the surface form

    def term(self, surface: str) -> str | None:
        """The term one surface term counts as; None drops it. Stop words are surface
        words, so they are checked before stemming."""
        if surface in self.stop_words:
            return None
        return surface if self.stem is None else self.stem(surface)


PLAIN = Analyzer()  # s12's terms, unchanged


def analyze(text: str, analyzer: Analyzer = PLAIN) -> Counter:
    """Term counts of ``text``: s12's surface terms, mapped by the analyzer, merged."""
    counts = Counter()
    for surface, count in search_terms(text).items():
        term = analyzer.term(surface)
        if term is not None:
            counts[term] += count
    return counts


@dataclass(frozen=True)
class Posting:
    """One record in a term's postings: which record, and how often the term occurs there."""

    memory_id: str
    count: int


@dataclass(frozen=True)
class InvertedIndex:
    """One user's searched records, read once: each record's terms, and each term's postings."""

    user_scope: str
    analyzer: Analyzer
    records: dict  # memory_id → StoredMemory: the conversation records, in store order
    terms: dict  # memory_id → Counter of its analyzed terms
    lengths: dict  # memory_id → its surface term occurrences, stop words too (BM25's |d|)
    total_length: int  # the sum of the lengths
    postings: dict  # term → tuple of Posting, in store order

    @property
    def searched_records(self) -> int:  # BM25's N
        return len(self.records)

    @property
    def average_length(self) -> float:  # BM25's avgdl
        return self.total_length / self.searched_records if self.searched_records else 0.0

    def document_frequency(self, term: str) -> int:  # BM25's df
        return len(self.postings.get(term, ()))


def searchable_text(record: StoredMemory) -> str:
    """What a record is found by, as in s12: its source title, summary and content."""
    return "\n".join((record.source.title, record.summary, record.content))


def build_index(records, user_scope: str, analyzer: Analyzer = PLAIN) -> InvertedIndex:
    """Read every record once: refuse another user's, skip profiles, post each term.

    A record's length is counted in s12's surface terms whatever the analyzer, so that
    changing the analyzer changes which terms count, never how long a record is."""
    kept, terms, lengths, postings = {}, {}, {}, {}
    for record in records:
        if record.user_scope != user_scope:
            raise ScopeError(f"record {record.memory_id!r} belongs to another user scope")
        if record.kind != CONVERSATION:
            continue
        text = searchable_text(record)
        counts = analyze(text, analyzer)
        kept[record.memory_id], terms[record.memory_id] = record, counts
        lengths[record.memory_id] = sum(search_terms(text).values())
        for term, count in counts.items():
            postings.setdefault(term, []).append(Posting(record.memory_id, count))
    return InvertedIndex(user_scope, analyzer, kept, terms, lengths, sum(lengths.values()),
                         {term: tuple(found) for term, found in postings.items()})


K1, B = 1.2, 0.75  # the textbook defaults: saturation and length normalization


def bm25_idf(document_frequency: int, searched_records: int) -> float:
    """ln(1 + (N − df + ½) / (df + ½)): rare terms weigh more; never negative."""
    return math.log1p((searched_records - document_frequency + 0.5)
                      / (document_frequency + 0.5))


def bm25_term_weight(count, document_frequency: int, searched_records: int, length,
                     average_length: float, k1: float = K1, b: float = B) -> float:
    """One term's part in one record: idf × count·(k1 + 1) / (count + k1·(1 − b + b·|d|/avgdl)).

    Repeats help less and less (the count factor stays below k1 + 1); a record longer
    than average is discounted by a share b. An empty collection (avgdl 0) counts the
    length ratio as 0 instead of dividing by it.
    """
    ratio = length / average_length if average_length else 0.0
    norm = 1.0 - b + b * ratio
    idf = bm25_idf(document_frequency, searched_records)
    return idf * count * (k1 + 1) / (count + k1 * norm)


def analyzed_terms(query, analyzer: Analyzer) -> tuple[str, ...]:
    """The query's terms as the analyzer counts them, sorted, each once."""
    return tuple(sorted({analyzer.term(t) for t in query.terms} - {None}))


def bm25_candidates(query, index: InvertedIndex, terms) -> list[RecallCandidate]:
    """Stage 2 through the index: the records in the union of the terms' postings."""
    found = dict.fromkeys(posting.memory_id for term in terms  # each once, as first met:
                          for posting in index.postings.get(term, ()))  # stage 4 orders them
    candidates = []
    for memory_id in found:
        record, counts = index.records[memory_id], index.terms[memory_id]
        matched = tuple(term for term in terms if term in counts)
        candidates.append(RecallCandidate(
            query.query_id, record, tuple(sorted(counts)), matched, record.source.captured_at,
            {term: counts[term] for term in matched}, index.lengths[memory_id]))
    return candidates


def score_bm25(terms, candidate: RecallCandidate, index: InvertedIndex, *, as_of,
               k1: float = K1, b: float = B) -> RecallScoreBreakdown:
    """Stage 3 with BM25: the sum of the matched terms' parts, each rounded as shown."""
    parts = {term: round(bm25_term_weight(
        candidate.term_counts[term], index.document_frequency(term), index.searched_records,
        candidate.document_length, index.average_length, k1, b), DECIMALS)
        for term in candidate.matched_terms}
    total = round(sum(parts.values()), DECIMALS)
    age = max(0.0, (as_of - candidate.captured_at).total_seconds() / 86_400)
    return RecallScoreBreakdown(
        tuple(parts), len(terms), round(len(parts) / len(terms), DECIMALS), 0.0, total, 0.0,
        total, round(age, DECIMALS), parts)


def rank_bm25(query, index: InvertedIndex, *, as_of, k1: float = K1,
              b: float = B) -> RecallResult:
    """Stages 2–4 for a normalized query: candidates, BM25 scores, s12's stable order."""
    if query.user_scope != index.user_scope:
        raise ScopeError("the query and the index belong to different user scopes")
    terms = analyzed_terms(query, index.analyzer)
    if not terms:
        return RecallResult(query, [], index.searched_records, 0, "only_stop_words")
    candidates = bm25_candidates(query, index, terms)
    scored = [(c, score_bm25(terms, c, index, as_of=as_of, k1=k1, b=b)) for c in candidates]
    scored.sort(key=lambda pair: rank_key(*pair))
    hits = [RecallHit(query.query_id, c.record.memory_id, rank, snippet_of(c.record),
                      RecallScope(c.record.user_scope, c.record.kind), c.record.source, bd)
            for rank, (c, bd) in enumerate(scored[:query.limit], start=1)]
    return RecallResult(query, hits, index.searched_records, len(candidates),
                        None if hits else "no_matching_terms")


def recall_bm25(index: InvertedIndex, text: str, *, limit: int = 5, as_of,
                k1: float = K1, b: float = B) -> RecallResult:
    """Stages 1–4: s12's query, then BM25 over the index. Recall only reads."""
    query = normalize_recall_query(text, user_scope=index.user_scope, limit=limit,
                                   issued_at=as_of)
    return rank_bm25(query, index, as_of=as_of, k1=k1, b=b)


def cosine(a, b) -> float:
    """a·b / (|a|·|b|): 1 for vectors pointing the same way, 0 for perpendicular ones.
    Each vector's length cancels out, so a long text is not favoured for being long."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0


def rank_by_cosine(query_vector, vectors: dict, limit: int = 5) -> list[tuple[str, float]]:
    """Dense recall by hand: every record (memory_id → vector) scored by its cosine with
    the query, best first, equal cosines by id. No term needs to be shared: every record
    is a candidate."""
    scored = [(memory_id, round(cosine(query_vector, vector), DECIMALS))
              for memory_id, vector in vectors.items()]
    return sorted(scored, key=lambda pair: (-pair[1], pair[0]))[:limit]
