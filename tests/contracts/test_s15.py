"""The s15 contract suite on the chapter's module and on the library's memory-tool backend,
and the build exercise: wrong pieces are rejected by the contract they break, a correct
piece written differently is accepted."""

import os
import stat

import pytest

from labmem.exercises import s15 as exercises
from labmem.exercises.suites.s15 import PRODUCTION, SCRATCH, SUITE
from labmem.scratch import s15 as scratch

NAMES = SUITE.names()
IMPLEMENTATIONS = {"scratch": SCRATCH, "production": PRODUCTION}


@pytest.mark.parametrize("contract", SUITE.contracts, ids=lambda c: c.check.__name__)
@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=str)
def test_every_contract_holds(contract, impl):
    contract.check(IMPLEMENTATIONS[impl])


def test_the_suite_has_fourteen_contracts():
    assert len(NAMES) == 14 == len(set(NAMES))


def stub(*args):
    raise NotImplementedError



def test_stubs_are_reported_as_not_written_yet():
    report = exercises.check_layer(split_memory_path=stub, resolve_inside=stub,
                                   replace_once=stub)
    assert report.passed == 0
    assert repr(report).startswith("✗ your memory tool backend passes 0 of 14 contracts")
    assert "not written yet (stub() raises NotImplementedError)" in repr(report)


def test_the_chapters_pieces_pass_and_unknown_pieces_are_refused():
    pieces = {name: getattr(scratch, name) for name in exercises.PIECES}
    assert repr(exercises.check_layer(**pieces)) == (
        "✓ your memory tool backend passes all 14 contracts")
    with pytest.raises(TypeError, match="'split_path'"):
        exercises.check_layer(split_path=stub)


# split_memory_path: the four unsafe versions a property check once let through, and more --

def _split(path, *, type_check=True, name_limit=True, total_limit=True,
           controls=lambda name: any(unicodedata.category(c) in scratch.REFUSED_CATEGORIES
                                     for c in name), depth=True, prefix="/memories/"):
    if type_check and not isinstance(path, str):
        raise scratch.refuse_path(path, "is not a string")
    if not isinstance(path, str):
        path = str(path)
    if total_limit and len(path) > 255:
        raise scratch.refuse_path(path, "is too long")
    if path != "/memories" and not path.startswith(prefix):
        raise scratch.refuse_path(path, "is outside /memories")
    names = path[len("/memories"):].split("/")[1:]
    if names and names[-1] == "":
        names.pop()
    for name in names:
        if name in ("", ".", "..") or name.startswith(".") or "\\" in name or controls(name):
            raise scratch.refuse_path(path, f"has {name!r}")
        if name_limit and (len(name) > 100 or len(name.encode("utf-8")) > 255):
            raise scratch.refuse_path(path, "has a long name")
    if depth and len(names) > 6:
        raise scratch.refuse_path(path, "is too deep")
    return tuple(names)


import unicodedata  # noqa: E402 — used by _split's default above


def split_without_type_check(path):
    return _split(path, type_check=False)


def split_without_name_limit(path):
    return _split(path, name_limit=False)


def split_without_total_limit(path):
    return _split(path, total_limit=False)


def split_refusing_only_nul(path):
    return _split(path, controls=lambda name: "\x00" in name)


def split_refusing_ascii_controls_only(path):
    return _split(path, controls=lambda name: any(ord(c) < 32 or ord(c) == 127 for c in name))


def split_with_prefix_only(path):
    return _split(path, prefix="/memories")


def split_without_depth_limit(path):
    return _split(path, depth=False)


def split_written_differently(path):
    """A regular-expression split, and the checks as one generator over the names."""
    import re

    if not isinstance(path, str) or len(path) > 255 or not re.fullmatch(r"/memories(/.*)?",
                                                                          path):
        raise scratch.MemoryPathError(f"path: {path!r} is not a memory path")
    names = re.sub(r"/$", "", path[len("/memories"):], count=1).split("/")[1:] \
        if path not in ("/memories", "/memories/") else []
    bad = (n for n in names if n in ("", ".", "..") or n[:1] == "." or "\\" in n
           or any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp", "Cs"} for c in n)
           or len(n) > 100 or len(n.encode("utf-8")) > 255)
    if next(bad, None) is not None or len(names) > 6:
        raise scratch.MemoryPathError(f"path: {path!r} is not a memory path")
    return tuple(names)


@pytest.mark.parametrize("wrong, broken", [
    (split_without_type_check, NAMES[5]),
    (split_without_name_limit, NAMES[6]),
    (split_without_total_limit, NAMES[6]),
    (split_refusing_only_nul, NAMES[4]),
    (split_refusing_ascii_controls_only, NAMES[4]),
    (split_with_prefix_only, NAMES[1]),
    (split_without_depth_limit, NAMES[6]),
])
def test_wrong_split_memory_path_is_rejected(wrong, broken):
    report = exercises.check_layer(split_memory_path=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_the_four_unsafe_rules_each_name_their_smallest_case():
    details = {}
    for wrong in (split_without_type_check, split_without_name_limit,
                  split_without_total_limit, split_refusing_only_nul):
        report = exercises.check_layer(split_memory_path=wrong)
        details[wrong.__name__] = " ".join(r.detail for r in report.failing)
    assert "Path('/memories/a'))" in details["split_without_type_check"]
    assert "(111 characters)" in details["split_without_name_limit"]
    assert "(256 characters)" in details["split_without_total_limit"]
    assert "split_memory_path('/memories/a\\x01b')" in details["split_refusing_only_nul"]


def test_split_memory_path_written_differently_is_accepted():
    assert exercises.check_layer(split_memory_path=split_written_differently).ok


# resolve_inside ----------------------------------------------------------------------------

def resolve_without_checking(tree, names):
    return tree.joinpath(*names)


def resolve_with_stat(tree, names):
    """Follows links (os.stat), so a link to a folder looks like a folder."""
    path = tree
    for step, name in enumerate(names, start=1):
        path = path / name
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            return tree.joinpath(*names)
        if step < len(names) and not stat.S_ISDIR(mode):
            raise scratch.refuse_path(name, "is a file")
    return path


def resolve_checking_the_last_name_only(tree, names):
    path = tree.joinpath(*names)
    if os.path.islink(path):
        raise scratch.refuse_path(names[-1], "is a link")
    return path


def resolve_with_realpath(tree, names):
    """Follows every link, then checks the result is under the tree: a link to a file
    inside the tree is let through, and so is a name below a file."""
    real = os.path.realpath(tree.joinpath(*names))
    if not (real == str(tree.resolve()) or real.startswith(str(tree.resolve()) + os.sep)):
        raise scratch.refuse_path("/".join(names), "leaves the tree")
    return tree.joinpath(*names)


def resolve_written_differently(tree, names):
    """Each prefix of the path, shortest first, with os.path.islink and os.path.isdir."""
    for depth in range(1, len(names) + 1):
        prefix = tree.joinpath(*names[:depth])
        if os.path.islink(prefix):
            raise scratch.MemoryPathError(f"path: {prefix.name} is a link")
        if not os.path.lexists(prefix):
            break
        if depth < len(names) and not os.path.isdir(prefix):
            raise scratch.MemoryPathError(f"path: {prefix.name} is a file")
    return tree.joinpath(*names)


@pytest.mark.parametrize("wrong, broken", [
    (resolve_without_checking, NAMES[7]),
    (resolve_with_stat, NAMES[7]),
    (resolve_checking_the_last_name_only, NAMES[7]),
    (resolve_with_realpath, NAMES[8]),
])
def test_wrong_resolve_inside_is_rejected(wrong, broken):
    report = exercises.check_layer(resolve_inside=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_resolve_inside_written_differently_is_accepted():
    assert exercises.check_layer(resolve_inside=resolve_written_differently).ok


# replace_once ------------------------------------------------------------------------------

def replace_first(text, old, new):
    if old not in text:
        raise scratch.MemoryToolError("old_str: not found")
    return text.replace(old, new, 1)


def replace_counting_with_str_count(text, old, new):
    """str.count does not count overlapping occurrences: 'aa' in 'aaa' is one."""
    if not old or text.count(old) != 1:
        raise scratch.MemoryToolError("old_str: must occur once")
    return text.replace(old, new, 1)


def replace_every(text, old, new):
    if not old or old not in text:
        raise scratch.MemoryToolError("old_str: not found")
    return text.replace(old, new)


def replace_written_differently(text, old, new):
    """Split on old: exactly two parts means exactly one (non-overlapping) occurrence;
    then the overlap check by find."""
    parts = text.split(old) if old else []
    if len(parts) != 2 or text.find(old, text.find(old) + 1) != -1:
        raise scratch.MemoryToolError("old_str: give text that appears exactly once")
    return parts[0] + new + parts[1]


@pytest.mark.parametrize("wrong, broken", [
    (replace_first, NAMES[10]),
    (replace_counting_with_str_count, NAMES[10]),
    (replace_every, NAMES[10]),
])
def test_wrong_replace_once_is_rejected(wrong, broken):
    report = exercises.check_layer(replace_once=wrong)
    assert not report.ok and broken in report.failing_names, repr(report)


def test_replace_once_written_differently_is_accepted():
    assert exercises.check_layer(replace_once=replace_written_differently).ok
