"""s12b recall: analyzers — what a scorer counts, made from the terms the index stores.

The index (:mod:`labmem.recall.index`) stores *surface* terms: exactly what
:func:`labmem.core.text.term_frequencies` extracts (``running``, ``runs``, ``the``). An
analyzer maps each surface term to the term a scorer counts:

* :class:`PlainAnalyzer` — the surface term itself: chapter s12's terms, and the
  teaching scorer's;
* :class:`EnglishAnalyzer` — drops English stop words (the project's documented list,
  ``data/analysis/english_stop_words.txt``) and reduces Latin-script words to their
  Snowball English stem (``running``, ``runs`` → ``run``); CJK and kana bigrams and words
  of other scripts pass unchanged.

One index serves every analyzer: :class:`AnalyzedIndex` groups the index's vocabulary by
analyzed term as records arrive, and at query time merges the postings of the surface
terms of one group. Nothing analyzer-specific is ever stored, so changing the analyzer
never means re-indexing.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from labmem.core.errors import InvalidInputError
from labmem.core.text import term_frequencies
from labmem.recall.index import Postings, TermIndex, distinct_groups
from labmem.recall.protocols import KeepsAnalyzedGroups, offers
from labmem.recall.sidecar import PackedStrings
from labmem.recall.store import StoredMemory

__all__ = [
    "Analyzer", "PlainAnalyzer", "EnglishAnalyzer", "QueryWord", "ANALYZERS",
    "resolve_analyzer", "english_stop_words", "load_stop_words", "default_stop_words_path",
    "AnalyzedIndex", "PackedGroups", "merge_surface_postings",
]

# Latin-script words (ASCII, Latin-1 and Latin Extended letters, combining accents): what
# the English stemmer is for. Other scripts, and CJK/kana bigrams, pass unchanged.
_LATIN_WORD = re.compile("[0-9a-z\u00df-\u00f6\u00f8-\u024f\u1e00-\u1eff\u0300-\u036f]+")


def default_stop_words_path() -> Path:
    """``data/analysis/english_stop_words.txt`` of the project checkout."""
    return (Path(__file__).resolve().parents[2] / "data" / "analysis"
            / "english_stop_words.txt")


def load_stop_words(path: str | Path) -> frozenset[str]:
    """A stop word file: one word per line, ``#`` starts a comment, blank lines ignored."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise InvalidInputError(
            "stop_words", f"cannot read {path.name} ({exc.strerror or exc})",
            "keep data/analysis/english_stop_words.txt in the checkout, or pass "
            "EnglishAnalyzer(stop_words=frozenset({...}))",
        ) from None
    words = (line.split("#", 1)[0].strip() for line in lines)
    return frozenset(word for word in words if word)


@functools.cache
def english_stop_words() -> frozenset[str]:
    """The project's English stop words (read once, on first use: importing does no I/O)."""
    return load_stop_words(default_stop_words_path())


@functools.cache
def _english_stemmer():
    import Stemmer  # PyStemmer: the Snowball project's own C stemmers

    return Stemmer.Stemmer("english")


@dataclass(frozen=True)
class QueryWord:
    """One word of a query, and what the analyzer made of it (``None``: dropped)."""

    word: str
    term: str | None

    @property
    def dropped(self) -> bool:
        return self.term is None

    def to_dict(self) -> dict[str, str | None]:
        return {"word": self.word, "term": self.term}


class Analyzer:
    """Base class: :meth:`term` maps one surface term; everything else follows from it."""

    key = "analyzer"

    @property
    def cache_key(self) -> str | None:
        """A name for this analyzer's exact behaviour, under which its terms for an index's
        vocabulary may be kept between processes; ``None``: never kept (the default, since
        a subclass may change behaviour without changing its name)."""
        return None

    def term(self, surface: str) -> str | None:
        """The analyzed form of one surface term; ``None`` drops it (a stop word)."""
        raise NotImplementedError

    def terms(self, text: str) -> Counter[str]:
        """Analyzed term counts of ``text``: its surface counts, merged by analyzed term."""
        counts: Counter[str] = Counter()
        for surface, count in term_frequencies(text).items():
            analyzed = self.term(surface)
            if analyzed is not None:
                counts[analyzed] += count
        return counts

    def query_words(self, text: str) -> tuple[QueryWord, ...]:
        """Each distinct surface term of a query (sorted) with the term it became."""
        return tuple(QueryWord(word, self.term(word)) for word in sorted(term_frequencies(text)))


@dataclass(frozen=True)
class PlainAnalyzer(Analyzer):
    """Every surface term is its own term: what chapter s12 and the teaching scorer use."""

    key = "plain"

    def term(self, surface: str) -> str | None:
        return surface


@dataclass(frozen=True)
class EnglishAnalyzer(Analyzer):
    """English stop words out, Snowball English stems for Latin-script words.

    ``stop_words=None`` reads the project's list on first use; pass ``frozenset()`` to keep
    every word, ``stem=False`` to keep surface forms (the ablation in bench/locomo_eval.py
    measures each alone).
    """

    stop_words: frozenset[str] | None = None
    stem: bool = True
    key = "english"
    _cache: dict[str, str | None] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)

    def __post_init__(self) -> None:
        words = english_stop_words() if self.stop_words is None else self.stop_words
        if isinstance(words, str) or not all(isinstance(w, str) for w in words):
            raise InvalidInputError("stop_words", "must be a set of strings",
                                    "pass frozenset({'the', 'a', ...}) or None for the default")
        object.__setattr__(self, "stop_words", frozenset(words))
        if not isinstance(self.stem, bool):
            raise InvalidInputError("stem", f"must be True or False, got {self.stem!r}")

    def __repr__(self) -> str:
        return f"EnglishAnalyzer(stop_words={len(self.stop_words)} words, stem={self.stem})"

    @property
    def cache_key(self) -> str | None:
        if type(self) is not EnglishAnalyzer:  # a subclass may analyze differently
            return None
        words = "\n".join(sorted(self.stop_words)).encode("utf-8")
        stemmer = "snowball" if self.stem else "none"
        return f"english-{stemmer}-{hashlib.sha256(words).hexdigest()[:16]}"

    def term(self, surface: str) -> str | None:
        cached = self._cache.get(surface, self)
        if cached is not self:
            return cached
        if surface in self.stop_words:
            analyzed = None
        elif self.stem and _LATIN_WORD.fullmatch(surface):
            analyzed = _english_stemmer().stemWord(surface)
        else:
            analyzed = surface
        self._cache[surface] = analyzed
        return analyzed


ANALYZERS: Mapping[str, type[Analyzer]] = MappingProxyType({
    "plain": PlainAnalyzer, "english": EnglishAnalyzer,
})


def resolve_analyzer(analyzer: str | Analyzer) -> Analyzer:
    """An analyzer object from a name (``"plain"``, ``"english"``) or itself."""
    if isinstance(analyzer, Analyzer):
        return analyzer
    if isinstance(analyzer, str) and analyzer in ANALYZERS:
        return ANALYZERS[analyzer]()
    raise InvalidInputError(
        "analyzer", f"{analyzer!r} is not an analyzer",
        f"use one of {', '.join(map(repr, ANALYZERS))}, or a labmem.recall.analyzers.Analyzer",
    )


def merge_surface_postings(parts: Iterable[Postings]) -> Postings:
    """One postings list from several surface terms' lists: counts add up per record."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return Postings.empty()
    if len(parts) == 1:
        return parts[0]
    positions = np.concatenate([p.positions for p in parts])
    unique, first, inverse = distinct_groups(positions)
    counts = np.bincount(inverse, weights=np.concatenate([p.counts for p in parts]))
    return Postings(unique, counts.astype(np.int64),
                    np.concatenate([p.lengths for p in parts])[first],
                    np.concatenate([p.captured_at for p in parts])[first])


@dataclass(frozen=True, eq=False)
class PackedGroups:
    """An analyzer's groups of a vocabulary (analyzed term -> its surface terms) as arrays:
    the analyzed terms, and every group's surface terms (sorted) one group after the
    other, ``ends[i]`` past group ``i``'s last. What an index keeps beside its sidecar
    (:meth:`~labmem.recall.index.InMemoryTermIndex.analyzed_groups`): a new process reads
    the arrays instead of decoding a ``dict`` of lists (bench/results/recall_design_notes.md)."""

    terms: PackedStrings
    surfaces: PackedStrings
    ends: np.ndarray

    @classmethod
    def of(cls, groups: Mapping[str, Iterable[str]]) -> PackedGroups:
        terms = sorted(groups)
        members = [sorted(groups[term]) for term in terms]
        ends = np.cumsum([len(m) for m in members], dtype=np.int64)
        return cls(PackedStrings.of(terms),
                   PackedStrings.of([s for m in members for s in m]), ends)

    def group(self, term: str) -> tuple[str, ...]:
        """The surface terms of ``term``, sorted; ``()`` when it is not one of the terms."""
        at = self.terms.find(term)
        if at is None:
            return ()
        start = int(self.ends[at - 1]) if at else 0
        return tuple(self.surfaces[start:int(self.ends[at])])

    def __len__(self) -> int:
        return len(self.terms)

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything, as named arrays (:meth:`from_arrays` reads them back)."""
        return {**self.terms.arrays("terms_"), **self.surfaces.arrays("surfaces_"),
                "group_ends": self.ends}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> PackedGroups | None:
        """The groups :meth:`arrays` wrote, or ``None`` when they are not of that shape."""
        terms = PackedStrings.from_arrays(arrays, "terms_")
        surfaces = PackedStrings.from_arrays(arrays, "surfaces_")
        ends = arrays.get("group_ends")
        if (terms is None or surfaces is None or ends is None or ends.dtype.kind not in "iu"
                or len(ends) != len(terms)
                or (len(ends) and (int(ends[-1]) != len(surfaces) or int(ends[0]) < 1
                                   or (ends[1:] <= ends[:-1]).any()))
                or (not len(ends) and len(surfaces))):
            return None
        return cls(terms, surfaces, ends)


#: How many analyzed terms' surface forms an :class:`AnalyzedIndex` keeps between look-ups
#: (some 200 KiB at most).
SURFACES_KEPT = 1024


class AnalyzedIndex:
    """A :class:`~labmem.recall.index.TermIndex` seen through an analyzer.

    It has the same protocol as the index it wraps, but :meth:`postings` takes an
    *analyzed* term and returns the merged postings of every surface term that becomes
    it. The groups (analyzed term → surface terms) grow with the index's vocabulary:
    :meth:`refresh` adds only the terms that records appended since brought in. Record
    lengths stay the surface lengths the index stores (stop words included).
    """

    def __init__(self, index: TermIndex, analyzer: str | Analyzer) -> None:
        self.index = index
        self.analyzer = resolve_analyzer(analyzer)
        self._kept: PackedGroups | None = None  # the index's base vocabulary, grouped
        self._groups: dict[str, list[str]] = {}  # every other surface term, grouped
        self._bound = 0  # records whose vocabulary is grouped
        self._merged: dict[str, Postings] = {}  # valid for the current bound
        self._by_surface: dict[str, dict[str, Postings]] = {}  # likewise
        self._surfaces: dict[str, tuple[str, ...]] = {}  # likewise: terms looked up

    def __repr__(self) -> str:
        kept = len(self._kept) if self._kept is not None else 0
        return (f"AnalyzedIndex({type(self.index).__name__}, {self.analyzer!r}, "
                f"records={self._bound}, terms={kept + len(self._groups)})")

    @property
    def searched_records(self) -> int:
        return self.index.searched_records

    @property
    def total_length(self) -> int:
        return self.index.total_length

    @property
    def records(self) -> int:
        return self._bound

    def refresh(self) -> None:
        """Catch the index up, then group the surface terms it has gained."""
        self.index.refresh()
        bound = self.index.records
        if bound == self._bound:
            return
        surfaces = self.index.vocabulary(self._bound)
        known = None
        if self._bound == 0 and offers(self.index, KeepsAnalyzedGroups):
            known = self.index.analyzed_groups(self.analyzer, self._group_all)
        if known is not None:  # the base vocabulary, grouped by an earlier process
            count, self._kept = known
            derived, self._groups = self._groups, {}  # derived: e.g. date words
            self._group((surface, term) for term, group in derived.items() for surface in group)
            surfaces = surfaces[count:]
        self.add_surfaces(surfaces)
        self._bound = bound
        self._merged.clear()
        self._by_surface.clear()
        self._surfaces.clear()

    def add_surfaces(self, surfaces: Iterable[str]) -> None:
        """Group more surface terms (the index's, or a derived field's such as a date)."""
        term_of = self.analyzer.term
        self._group((surface, term_of(surface)) for surface in surfaces)

    def _group_all(self, surfaces: Iterable[str]) -> dict[str, list[str]]:
        """The groups of ``surfaces`` alone (what :meth:`refresh` lets the index keep)."""
        view = AnalyzedIndex(self.index, self.analyzer)
        view.add_surfaces(surfaces)
        return view._groups

    def _group(self, pairs: Iterable[tuple[str, str | None]]) -> None:
        kept = self._kept
        for surface, analyzed in pairs:
            if analyzed is not None:
                group = self._groups.get(analyzed)
                if group is not None and surface in group:
                    continue
                if kept is not None and surface in kept.group(analyzed):
                    continue
                if group is None:
                    group = self._groups[analyzed] = []
                group.append(surface)
                self._merged.pop(analyzed, None)
                self._by_surface.pop(analyzed, None)
                self._surfaces.pop(analyzed, None)

    def surfaces(self, term: str) -> tuple[str, ...]:
        """The surface terms that become ``term``, sorted; ``()`` when none does. Kept for
        the terms last queried (at most :data:`SURFACES_KEPT`): a query asks for each of
        its terms more than once (to score, to explain), and a look-up in the packed groups
        decodes strings."""
        found = self._surfaces.get(term)
        if found is None:
            found = self._kept.group(term) if self._kept is not None else ()
            more = self._groups.get(term)
            if more:
                found = tuple(sorted((*found, *more)))
            if len(self._surfaces) >= SURFACES_KEPT:
                self._surfaces.clear()
            self._surfaces[term] = found
        return found

    def surface_postings(self, term: str) -> dict[str, Postings]:
        """Each surface term of ``term`` with its own postings (what a breakdown shows)."""
        found = self._by_surface.get(term)
        if found is None:
            found = self._by_surface[term] = {s: self.index.postings(s)
                                              for s in self.surfaces(term)}
        return found

    def postings(self, term: str) -> Postings:
        """The records containing any surface form of ``term``, counts summed."""
        merged = self._merged.get(term)
        if merged is None:
            merged = self._merged[term] = merge_surface_postings(
                self.index.postings(s) for s in self.surfaces(term))
        return merged

    def document_frequency(self, term: str) -> int:
        return len(self.postings(term))

    def record(self, position: int) -> StoredMemory:
        return self.index.record(position)

    def vocabulary(self, start: int = 0) -> tuple[str, ...]:
        """The analyzed terms of the surface terms first used from ``start`` on."""
        seen = dict.fromkeys(self.analyzer.term(s) for s in self.index.vocabulary(start))
        return tuple(t for t in seen if t is not None)
