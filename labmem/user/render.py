"""s11 projection: the agent's ``<user_memory>`` block and MEMORY.md, rendered from the state.

Both show the profile and the *active* preferences at one instant (``as_of``); neither is
ever read back as canonical state. :func:`render_memory_md` is the definition of
MEMORY.md's bytes: the block cache in :mod:`labmem.user.blocks` must produce exactly them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from labmem.core.clock import format_timestamp
from labmem.core.render import XML, count, join_lines, xml_attributes
from labmem.user.model import Preference, UserProfile, _stamp


def active_at(prefs: Mapping[str, Preference], as_of: datetime) -> tuple[Preference, ...]:
    """The preferences active at ``as_of``, by key."""
    return tuple(prefs[k] for k in sorted(prefs) if prefs[k].is_active(as_of))


def _attr(value: Any, field: str = "text") -> str:
    return XML.text(value, field)


def render_user_context(user_scope: str, profile: UserProfile,
                        active: tuple[Preference, ...], as_of: datetime) -> str:
    """The agent-facing block, printed through the core renderer (:mod:`labmem.core.render`).

    Every stored value is one escaped line, so a value can neither close an element nor
    start a line of its own; the block is checked to be one element per line.
    """
    head = xml_attributes([("user_scope", user_scope), ("as_of", format_timestamp(as_of))],
                          block="user_memory")
    lines = [f"<user_memory{head}>",
             f'  <profile revision="{count(profile.revision, "profile.revision")}">']
    for name, value in profile.fields().items():
        lines.append(f'    <field name="{name}">{_attr(value, f"profile.{name}")}</field>')
    lines.append("  </profile>")
    lines.append("  <preferences>")
    for pref in active:
        attributes = [("key", pref.key), ("revision", count(pref.revision, "revision"))]
        if pref.expires_at is not None:
            attributes.append(("expires_at", format_timestamp(pref.expires_at)))
        lines.append(f"    <preference{xml_attributes(attributes, block='preference')}>"
                     f"{_attr(pref.value, f'preferences.{pref.key}')}</preference>")
    lines.append("  </preferences>")
    lines.append("</user_memory>")
    return join_lines(lines, "user_memory")


def render_memory_md(user_scope: str, profile: UserProfile,
                     active: tuple[Preference, ...], as_of: datetime) -> str:
    """MEMORY.md: a human-readable projection, never read back as canonical state."""
    return _memory_md(user_scope, profile, [_memory_md_line(p) for p in active], as_of)


def _memory_md_line(pref: Preference) -> str:
    return (f"- {pref.key}: {_attr(pref.value)} (revision {pref.revision}"
            + ("" if pref.expires_at is None else f", until {_stamp(pref.expires_at)}")
            + ")")


def encoded_line(pref: Preference) -> bytes:
    """One preference line of MEMORY.md, newline included, UTF-8 encoded."""
    return (_memory_md_line(pref) + "\n").encode("utf-8")


def memory_md_head(user_scope: str, as_of: datetime) -> str:
    """MEMORY.md up to its profile lines (the only part that names ``as_of``)."""
    return ("# User memory\n\n<!-- projection of profile.json + the preference log; "
            f"user_scope: {user_scope}; as_of: {_stamp(as_of)} -->\n\n"
            "## Profile\n\n")


def memory_md_profile(profile: UserProfile) -> str:
    """MEMORY.md from its profile lines up to its preference lines."""
    fields = profile.fields()
    lines = [f"- {name}: {_attr(value)}" for name, value in fields.items()] or ["- (empty)"]
    return "\n".join(lines) + "\n\n## Preferences\n\n"


def _memory_md(user_scope: str, profile: UserProfile, preference_lines: list[str],
               as_of: datetime) -> str:
    return (memory_md_head(user_scope, as_of) + memory_md_profile(profile)
            + "\n".join(preference_lines or ["- (none active)"]) + "\n")
