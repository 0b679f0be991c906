"""The contract-suite machinery: reports, and assembling a learner's layer."""

from __future__ import annotations

import pytest

from labmem.exercises.contracts import Contract, ContractBroken, ContractSuite, assemble
from tests.scratch import toy_layer

SUITE = ContractSuite("counter", (
    Contract("counting starts at zero", lambda m: _expect(m.Counter().value, 0)),
    Contract("each bump adds one", lambda m: _expect(m.bumped(3), 3)),
    Contract("a negative bump is refused", lambda m: _refused(m)),
))


def _expect(got, want):
    if got != want:
        raise ContractBroken(f"smallest case: got {got!r}, expected {want!r}")


def _refused(m):
    try:
        m.Counter().bump(-1)
    except ValueError:
        return
    raise ContractBroken("smallest case: bump(-1) was accepted")


def test_the_module_passes_its_own_suite():
    report = SUITE.run(toy_layer, who="the from-scratch")
    assert report.ok and repr(report) == "✓ the from-scratch counter passes all 3 contracts"


def test_a_stub_piece_is_reported_as_not_written():
    def step(n):
        raise NotImplementedError

    report = SUITE.run(assemble(toy_layer, {"step": step}))
    assert not report.ok and report.passed == 2
    assert repr(report) == ("✗ your counter passes 2 of 3 contracts; failing:\n"
                            "  · each bump adds one — not written yet (step() raises "
                            "NotImplementedError)")


def test_a_wrong_method_and_a_crash_are_reported_not_raised():
    report = SUITE.run(assemble(toy_layer, {"Counter.bump": lambda self, n: None,
                                            "step": lambda n: 2}))
    assert [r.ok for r in report.results] == [True, False, False]
    assert report.failing[0].detail.startswith("bumped() raised AttributeError: ")
    assert report.failing[1].detail == "smallest case: bump(-1) was accepted"


def test_assembling_leaves_the_module_alone_and_refuses_unknown_names():
    assemble(toy_layer, {"step": lambda n: 5})
    assert SUITE.run(toy_layer).ok
    with pytest.raises(ValueError, match="'stepp'"):
        assemble(toy_layer, {"stepp": lambda n: 1})
    with pytest.raises(ValueError, match="'Counter.bumpp'"):
        assemble(toy_layer, {"Counter.bumpp": lambda self, n: 1})


def test_every_layer_exercise_names_pieces_its_module_defines():
    import importlib

    from labmem.exercises import layer_exercises

    for exercise in layer_exercises():
        module = importlib.import_module(f"labmem.scratch.{exercise.module}")
        own = {}
        for name in exercise.pieces:
            owner = module
            for part in name.split("."):
                owner = getattr(owner, part)
            own[name] = owner
        assemble(module, own)  # each name is one the module defines
        assert exercise.contracts >= 8


def test_a_report_names_its_broken_contracts():
    report = SUITE.run(assemble(toy_layer, {"step": lambda n: 2}))
    assert report.failing_names == {"each bump adds one"}
    assert SUITE.run(toy_layer).failing_names == frozenset()
