"""Give every notebook figure on the site the alt text the notebook stores with it.

A chapter's figure carries its alt text in the output metadata (``image/png`` → ``alt``,
written by ``labmem.notebook.describe``). myst-nb keeps only ``width`` and ``height`` from
there and names the PNG it writes by the SHA-256 of its bytes, so this extension indexes
every stored PNG by that digest and sets ``alt`` on the image node that shows it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from docutils import nodes


def alt_texts(notebooks) -> dict[str, str]:
    """sha256 of each stored PNG → its alt text, over ``notebooks`` (paths)."""
    found = {}
    for path in notebooks:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            for output in cell.get("outputs", []):
                png = output.get("data", {}).get("image/png")
                alt = output.get("metadata", {}).get("image/png", {}).get("alt")
                if png and alt:
                    digest = hashlib.sha256(base64.b64decode("".join(png))).hexdigest()
                    found[digest] = alt
    return found


def _index(app) -> None:
    app.env.labmem_alt = alt_texts(Path(app.srcdir).rglob("*.ipynb"))


def _set_alt(app, doctree) -> None:
    known = getattr(app.env, "labmem_alt", {})
    for image in doctree.findall(nodes.image):
        digest = Path(image.get("uri", "")).stem
        if digest in known:
            image["alt"] = known[digest]


def setup(app):
    app.connect("builder-inited", _index)
    app.connect("doctree-read", _set_alt)
    return {"parallel_read_safe": True, "env_version": 1}
