"""What a document's roles can come from outside its own bytes, and which source won.

Most specific first (design.md §16): the document's own metadata (front matter, then its
sidecar, then its manifest line), then its object tag, then its folder rule — unless the rule
says ``override: true``, when it wins over all of them. The source that set the roles is kept
on every chunk (``metadata.access_roles_from``), so *why not*, ``show`` and the console can
name it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from indexer.permissions.dacl import FileAccess
from indexer.permissions.rules import Rule

Layer = tuple[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Outside:
    """A document's folder rule and roles tag, as this run read them (picklable: it travels
    to the parser workers with the document).

    ``rules_file`` is set when the run has a rules file, ``unmatched`` to what that file gives
    an object no rule matched; ``tag`` is ``None`` when the object has no roles tag.
    ``version`` fingerprints all of it and the manifest line: a chunk whose stored version
    differs while its bytes did not is re-tagged, not re-embedded.
    """

    rule: Rule | None = None
    rules_file: str = ""
    unmatched: str = ""
    tag_name: str = ""
    tag: tuple[str, ...] | None = None
    version: str = ""
    # Who reads it by its own DACL (an SMB share's file): the roles every other layer may
    # only narrow.
    dacl: FileAccess | None = None

    def below(self) -> list[Layer]:
        """Layers under the document's own metadata: its rule, then its tag."""
        layers: list[Layer] = []
        if self.rule is not None and not self.rule.override:
            layers.append((self._rule_name(), {"access_roles": list(self.rule.roles)}))
        if self.tag is not None:
            layers.append((f"tag {self.tag_name}", {"access_roles": list(self.tag)}))
        return layers

    def above(self) -> list[Layer]:
        """Layers over the document's own metadata: an override rule."""
        if self.rule is not None and self.rule.override:
            return [(self._rule_name(), {"access_roles": list(self.rule.roles)})]
        return []

    def _rule_name(self) -> str:
        assert self.rule is not None
        return f"{self.rule.stored_name()} of {self.rules_file}"

    def unmatched_source(self) -> str | None:
        """What set the roles of an object no layer gave any: the rules file's ``unmatched:
        public``; None when there is no rules file (public by absence, as ever)."""
        if self.rules_file and self.rule is None and self.unmatched == "public":
            return f"unmatched: public, in {self.rules_file}"
        return None

    def refused(self) -> str | None:
        """Why an object no layer gave roles is refused (``unmatched: refuse``), else None."""
        if self.rules_file and self.rule is None and self.unmatched == "refuse":
            return (
                f"no rule of {self.rules_file} matches it and the file says 'unmatched: "
                "refuse': add a rule for its folder, or give the document access_roles"
            )
        return None


def versioned(outside: Outside, manifest_line: Mapping[str, Any], sidecar: str = "") -> Outside:
    """``outside`` with its ``version``: empty when nothing outside the bytes says anything,
    so chunks indexed before rules and tags existed keep matching. ``sidecar`` is the version
    of the document's sidecar as listed: an edited sidecar is a change of its roles."""
    said: dict[str, Any] = {}
    if sidecar:
        said["sidecar"] = sidecar
    if outside.rules_file:
        rule = outside.rule
        said["rule"] = [rule.patterns, rule.roles, rule.override] if rule else outside.unmatched
    if outside.tag is not None:
        said["tag"] = [outside.tag_name, outside.tag]
    if manifest_line:
        said["manifest"] = manifest_line
    if outside.dacl is not None:
        dacl = outside.dacl
        said["dacl"] = [dacl.allow, dacl.deny, dacl.narrowed, [d.shown() for d in dacl.deciders]]
        if dacl.unknown:  # (the directory reading one of them later is a change of roles)
            said["dacl"].append(list(dacl.unknown))
        if dacl.also:
            said["share"] = dacl.also
    if not said:
        return outside
    text = json.dumps(said, ensure_ascii=False, sort_keys=True, default=str)
    version = hashlib.sha256(text.encode()).hexdigest()[:16]
    return replace(outside, version=version)
