"""labmem — a small, real library for teaching how AI agents remember.

The folders are the architecture: the shared core in :mod:`labmem.core`, then one entry
per chapter (``transcript`` s09, ``workspace`` s10, ``user`` s11, ``recall`` s12/s12b,
``artifacts`` s13, ``context`` and ``mmu`` s14, ``story`` the case study), then the faces
that compose them (``walkthrough``, ``cli``, ``chat``, ``resilience``, ``notebook``,
``exercises``). Importing ``labmem`` does no I/O and constructs no model client.
"""

from labmem.core.errors import LabmemError

__version__ = "0.1.0"
__all__ = ["LabmemError", "__version__"]
