"""Which files a piece of code opens (or lists) under one directory, for tests that check
that an operation does not re-read its history. An audit hook (``sys.addaudithook``) sees
every way of opening a file; hooks cannot be removed, so one is installed per process, on
first use, and records only between :meth:`FileAccess.start` and :meth:`FileAccess.stop`.
"""

from __future__ import annotations

import os
import sys


class FileAccess:
    """``start(directory)`` returns the list it fills: each path opened under ``directory``
    (relative to it; lock files left out), or ``(event, path)`` pairs when ``events`` names
    more than ``"open"`` (``"os.listdir"``, ``"os.scandir"``: a descriptor shows as ``<fd>``).
    """

    hooked = False
    active: tuple[str, tuple[str, ...], list] | None = None

    @classmethod
    def start(cls, directory, events: tuple[str, ...] = ("open",)) -> list:
        if not cls.hooked:
            sys.addaudithook(cls._hook)
            cls.hooked = True
        cls.active = (str(directory), events, [])
        return cls.active[2]

    @classmethod
    def stop(cls) -> None:
        cls.active = None

    @classmethod
    def _hook(cls, event, args) -> None:
        active = cls.active
        if active is None or event not in active[1]:
            return
        root, events, seen = active
        path = args[0]
        if isinstance(path, int):  # a directory descriptor: listed by number
            name = "<fd>"
        elif isinstance(path, (str, bytes, os.PathLike)):
            name = os.fsdecode(path)
            if not name.startswith(root) or name.endswith(".lock"):
                return
            name = os.path.relpath(name, root)
        else:
            return
        seen.append(name if events == ("open",) else (event, name))
