"""labmem — a small, real library for teaching how AI agents remember.

Each chapter's mechanism lives in its own module (``labmem.remote``, ``labmem.recall``
…) on top of a shared core (``clock``, ``provenance``, ``text``, ``storage``,
``errors``). Importing ``labmem`` does no I/O and constructs no model client.
"""

from labmem.errors import LabmemError

__version__ = "0.1.0"
__all__ = ["LabmemError", "__version__"]
