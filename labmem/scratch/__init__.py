"""The from-scratch layers: one module per chapter, written in the chapter's own cells.

Each chapter builds its layer cell by cell, and every code cell whose first line is
``# scratch: <module>`` (``# scratch: s09``) is part of this package: the module's source is
exactly those cells, in order, after two generated lines that name the chapter. A test
(``tests/scratch/test_export.py``) fails when a module and its chapter differ;
``python tools/scratch.py`` (``make scratch``) writes the modules again from the chapters.
Edit the chapter, never the module.

A from-scratch module is the layer's *reference*: the records, the contract and the
algorithm the chapter teaches, with the durability rules it teaches and nothing else (no
caches, sidecars, pruning or incremental folds). The production layers (``labmem.transcript``,
``labmem.workspace``, ``labmem.user``, ``labmem.recall``) are held equal to it by one
contract suite per layer (:mod:`labmem.exercises.contracts`), which also judges the
learner's own version of the layer. These modules import the standard library and each
other only (``tests/test_import_rules.py``): a reference never depends on a fast path.
"""
