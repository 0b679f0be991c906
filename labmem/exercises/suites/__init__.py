"""One contract suite per layer (:mod:`labmem.exercises.contracts`), one module per chapter.

Each module defines ``SUITE`` (the layer's contracts, in the order the chapter teaches them)
and the implementations it is run on: ``SCRATCH`` (the chapter's from-scratch module) and
``PRODUCTION`` (the library's layer behind a small adapter with the same operations). The
chapter's exercise runs the same ``SUITE`` on the learner's assembled layer.
"""
