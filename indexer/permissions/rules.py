"""Folder rules (``--acl-rules FILE``, issue #35 §1): a document's roles from where it lies.

A rules file is YAML, versioned beside the data::

    unmatched: refuse          # required: what an object no rule matches gets (public | refuse)
    case: sensitive            # or insensitive, for a share that came from Windows
    exclude: ["**/archive/**"] # never indexed: passed over and counted
    rules:                     # ordered: the first rule that matches an object is its rule
      - match: finance/**
        access_roles: [finance]
      - match: [hr/薪酬/*.xlsx, hr/薪酬/*.csv]
        access_roles: [hr-comp]
        override: true         # wins over the document's own metadata
      - match: public/**
        access_roles: []       # public, said out loud

Globs are matched against the object's key below the source (``s3://bucket/prefix`` → the
key after the prefix; a folder → the path inside it), in NFC (a folder macOS wrote decomposed
matches the glob typed composed), case-sensitively unless the file says ``case:
insensitive``: ``*`` and ``?`` within one folder, ``**`` any number of folders (none too:
``**/a.md`` matches ``a.md``), ``[abc]`` and ``{a,b}`` as in a shell.

The file is read whole before anything is indexed, and refused — the run stops, nothing is
written — if it is not valid YAML, says anything this module does not know, names a role no
principal can hold (``user:…``, ``anyone``), or leaves ``unmatched`` unsaid: a new folder must
never go public because nobody wrote a rule for it.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from wcmatch import glob

from indexer.metadata_limits import MetadataLimitError, refuse_aliases
from retrieval_svc.acl import RoleValueError, parse_roles
from retrieval_svc.config_words import detail
from retrieval_svc.key_entry import reserved_role

MAX_RULES_BYTES = 1_048_576
MAX_RULES = 10_000
MAX_PATTERN_CHARS = 1024
# One folder, any depth, dot folders matched like any other, {a,b} alternatives.
GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE


class RulesError(ValueError):
    """A rules file that cannot be used; the message says where and what to do."""


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    match: list[str] = Field(min_length=1)
    access_roles: Any
    override: bool = False

    @field_validator("match", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("match")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip():
                raise ValueError("a glob is empty")
            if len(pattern) > MAX_PATTERN_CHARS:
                raise ValueError(f"a glob is longer than {MAX_PATTERN_CHARS} characters")
            if pattern.startswith("/"):
                raise ValueError(
                    f"{pattern!r} starts with '/': globs match keys below the source, "
                    "write it without the leading slash"
                )
        # Keys and globs are compared in one Unicode form: a folder typed Gehälter (NFC)
        # matches the same folder as macOS writes it (NFD), in a share or an S3 key.
        return [unicodedata.normalize("NFC", p) for p in value]


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    unmatched: Literal["public", "refuse"]
    # insensitive: a share that came from Windows, where Finance/ and finance/ are one folder
    case: Literal["sensitive", "insensitive"] = "sensitive"
    # Objects never indexed (globs over keys, as in rules): passed over and counted; one
    # already in the index leaves it at the next run that prunes.
    exclude: list[str] = Field(default_factory=list, max_length=MAX_RULES)
    rules: list[_Rule] = Field(max_length=MAX_RULES)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: its number (1-based, as the file orders them), globs and roles."""

    number: int
    patterns: tuple[str, ...]
    roles: tuple[str, ...]
    override: bool

    def describe(self) -> str:
        """How a run's warnings name it: ``rule 2 (finance/**)``."""
        shown = ", ".join(self.patterns)
        return f"rule {self.number} ({shown}{', override' if self.override else ''})"

    def stored_name(self) -> str:
        """How a document records it (*why not*, the console, ``show``): ``rule
        (finance/**)``, by its globs and never its number — an edit that moves it keeps the
        record true although the document is not written again."""
        shown = ", ".join(self.patterns)
        return f"rule ({shown}{', override' if self.override else ''})"


@dataclass(slots=True)
class AclRules:
    """A loaded rules file: ``match`` gives an object's rule (or None), counting matches."""

    path: str
    unmatched: Literal["public", "refuse"]
    rules: tuple[Rule, ...]
    warnings: list[str] = field(default_factory=list)
    case: Literal["sensitive", "insensitive"] = "sensitive"
    exclude: tuple[str, ...] = ()  # keys never indexed (passed over as excluded)
    matched: list[int] = field(default_factory=list)  # objects each rule matched this run
    unmatched_count: int = 0
    _regexes: list[re.Pattern[str]] = field(default_factory=list)
    _needles: list[tuple[str, ...]] = field(default_factory=list)
    _by_folder: dict[str, tuple[int, ...]] = field(default_factory=dict)
    _any_folder: tuple[int, ...] = ()
    _candidates: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # wcmatch translates each glob to a regular expression (the same ones its matchers
        # use). A key is tried only against the rules that can match its first folder: those
        # whose globs name that folder literally, and those starting with a wildcard — in the
        # file's order, so the first that matches is still the first rule that does. (One
        # matcher per rule took ~100 µs a key with 40 rules; this, a few.)
        by_folder: dict[str, list[int]] = {}
        anywhere: list[int] = []
        for i, rule in enumerate(self.rules):
            patterns = [self.fold(p) for p in rule.patterns]
            included, _ = glob.translate(patterns, flags=GLOB_FLAGS)
            self._regexes.append(re.compile("|".join(included)))
            self._needles.append(tuple(_needle(p) for p in patterns))
            firsts = {p.split("/", 1)[0] for p in patterns}
            if any(glob.is_magic(first, flags=GLOB_FLAGS) for first in firsts):
                anywhere.append(i)
            else:
                for first in firsts:
                    by_folder.setdefault(first, []).append(i)
        self._by_folder = {k: tuple(v) for k, v in by_folder.items()}
        self._any_folder = tuple(anywhere)
        self.matched = [0] * len(self.rules)

    def fold(self, text: str) -> str:
        """``text`` as keys and globs are compared: NFC, and case-folded for a rules file
        that says ``case: insensitive``."""
        text = unicodedata.normalize("NFC", text)
        return unicodedata.normalize("NFC", text.casefold()) if self.case == "insensitive" else text

    def _rules_for(self, folder: str) -> tuple[int, ...]:
        found = self._candidates.get(folder)
        if found is None:
            found = tuple(sorted({*self._by_folder.get(folder, ()), *self._any_folder}))
            if len(self._candidates) < 100_000:
                self._candidates[folder] = found
        return found

    def match(self, key: str) -> Rule | None:
        """The first rule whose glob matches ``key`` (counted), or None. Keys are compared
        in NFC, as the globs are (and case-folded with ``case: insensitive``)."""
        found = self._first(key)
        if found is None:
            self.unmatched_count += 1
            return None
        self.matched[found] += 1
        return self.rules[found]

    def rule_for(self, key: str) -> Rule | None:
        """``match`` without counting (what a key's rule would be)."""
        found = self._first(key)
        return None if found is None else self.rules[found]

    def _first(self, key: str) -> int | None:
        key = self.fold(key)
        for i in self._rules_for(key.split("/", 1)[0]):
            # (a substring every match must hold, checked in C before the regex's backtracking)
            if any(n in key for n in self._needles[i]) and self._regexes[i].match(key):
                return i
        return None

    def fingerprint(self) -> str:
        """What the file says, hashed (a changed rule changes it)."""
        body: list[Any] = [self.unmatched, [(r.patterns, r.roles, r.override) for r in self.rules]]
        if self.case != "sensitive":
            body.append(self.case)
        return hashlib.sha256(json.dumps(body, ensure_ascii=False).encode()).hexdigest()[:16]

    def summary(self) -> list[str]:
        """After a run: the rules that matched nothing (a typo, or a folder gone)."""
        return [
            f"{self.path}: {rule.describe()} matched no object in this run"
            for rule, count in zip(self.rules, self.matched, strict=True)
            if count == 0
        ]


def changed_below(before: AclRules | None, after: AclRules | None) -> list[str] | None:
    """Where a rules edit can change an object's rule: literal key prefixes every such key
    starts with (none at all: no object's rule changed), or None when any key may.

    An object's rule is the first that matches it. Where the rules both files share keep
    their order, an object no added or removed rule matches has the same first match in both
    (the same rule, or none), so only the keys those rules' globs can match may change: each
    glob's literal start, up to its first wildcard. Widened to every key: a changed
    ``unmatched``, ``case: insensitive`` (keys are compared case-folded), a reordering, a
    glob that starts with a wildcard, or one whose start another spelling of a key reaches
    in NFC (keys are compared in NFC; a stored key may be in any form, see ``_one_form``).
    """
    if before is None or after is None:
        return None if before is not after else []
    if before.unmatched != after.unmatched or "insensitive" in (before.case, after.case):
        return None

    def said(rule: Rule) -> tuple[Any, ...]:
        return (rule.patterns, rule.roles, rule.override)

    was, now = [said(r) for r in before.rules], [said(r) for r in after.rules]
    both = Counter(was) & Counter(now)
    if _kept(was, both) != _kept(now, both):
        return None  # (the rules both say, in another order)
    changed = (Counter(was) - both) + (Counter(now) - both)
    prefixes: set[str] = set()
    for patterns, _, _ in changed:
        for pattern in patterns:
            literal = re.split(r"[*?\[{\\]", pattern, maxsplit=1)[0]
            if not literal or not _one_form(literal):
                return None
            prefixes.add(literal)
    return sorted(p for p in prefixes if not any(p != q and p.startswith(q) for q in prefixes))


def _one_form(text: str) -> bool:
    """Whether every key whose NFC starts with ``text`` starts with it as stored: no character
    of it decomposes, combines or is where a singleton lands (Ω from U+2126, K from the Kelvin
    sign, an ideograph from its CJK compatibility twin)."""
    return unicodedata.normalize("NFD", text) == text and not any(
        unicodedata.combining(c) or c in _singleton_targets() for c in text
    )


@cache
def _singleton_targets() -> frozenset[str]:
    """The characters a single other one decomposes to canonically (walked once, ~0.3 s)."""
    found = set()
    for point in range(0x110000):
        mapped = unicodedata.decomposition(chr(point))
        if mapped and not mapped.startswith("<") and " " not in mapped:
            found.add(chr(int(mapped, 16)))
    return frozenset(found)


def _kept(said: list[tuple[Any, ...]], both: Counter[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``said`` with only the rules ``both`` counts, in order (as many times as it counts)."""
    left, kept = Counter(both), []
    for rule in said:
        if left[rule] > 0:
            left[rule] -= 1
            kept.append(rule)
    return kept


def _needle(pattern: str) -> str:
    """The longest run of plain characters of ``pattern`` between wildcards and slashes
    (every key it matches holds it: a slash is not, as ``**/`` matches no folder at all, so
    ``**/secret-*`` matches ``secret-a`` at the root); empty for a pattern with alternatives
    or classes, which may not."""
    if any(c in pattern for c in "{[\\!"):
        return ""
    return max(re.split(r"[*?/]+", pattern), key=len)


def _where(loc: Sequence[int | str]) -> str:
    parts = []
    for i, item in enumerate(loc):
        if item == "rules" and i + 1 < len(loc) and isinstance(loc[i + 1], int):
            continue
        parts.append(f"rule {item + 1}" if isinstance(item, int) else str(item))
    return ": ".join(parts) or "the file"


def _roles(value: Any, where: str) -> tuple[str, ...]:
    try:
        roles = parse_roles(value)
    except RoleValueError as exc:
        raise RulesError(f"{where}: access_roles cannot be read: {exc}") from None
    for role in roles:
        if (why := reserved_role(role)) is not None:
            raise RulesError(f"{where}: access_roles: {why}")
    return tuple(roles)


def _covers(earlier: str, later: str) -> bool:
    """Whether glob ``earlier`` surely matches every key ``later`` can (a cheap, partial
    test: the same glob, ``**``, or a folder's ``dir/**`` before a glob inside ``dir/``)."""
    if earlier in (later, "**"):
        return True
    if earlier.endswith("/**"):
        folder = earlier[:-2]
        literal = not glob.is_magic(folder, flags=GLOB_FLAGS)
        return literal and later.startswith(folder)
    return False


def _shadowed(rules: Sequence[Rule]) -> list[str]:
    warnings = []
    for j, later in enumerate(rules):
        for earlier in rules[:j]:
            if all(any(_covers(e, p) for e in earlier.patterns) for p in later.patterns):
                warnings.append(
                    f"{later.describe()} can never match: {earlier.describe()} comes first and "
                    "matches everything it does (the first matching rule wins: move it up)"
                )
                break
    return warnings


def parse_rules(text: str, path: str = "rules") -> AclRules:
    """A rules file's text, validated; raises RulesError."""
    if len(text.encode()) > MAX_RULES_BYTES:
        raise RulesError(f"{path} is over the limit of {MAX_RULES_BYTES:,} bytes")
    try:
        refuse_aliases(text)
        data = yaml.safe_load(text)
    except MetadataLimitError as exc:
        raise RulesError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else ("?", "?")
        problem = getattr(exc, "problem", None) or str(exc)
        raise RulesError(
            f"{path} is not valid YAML (line {line}, column {column}): {problem}"
        ) from None
    if not isinstance(data, dict):
        raise RulesError(f"{path} must be a mapping with 'unmatched' and 'rules'")
    if "unmatched" not in data:
        raise RulesError(
            f"{path} must say what an object no rule matches gets: 'unmatched: refuse' (it "
            "fails, nothing is published) or 'unmatched: public'; there is no default, so a "
            "new folder never goes public by accident"
        )
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_where(e['loc'])}: {detail(e, 'en')}" for e in exc.errors()[:5])
        raise RulesError(f"{path}: {problems}") from None
    rules = tuple(
        Rule(
            number=i,
            patterns=tuple(r.match),
            roles=_roles(r.access_roles, f"{path}: rule {i}"),
            override=r.override,
        )
        for i, r in enumerate(parsed.rules, start=1)
    )
    return AclRules(
        path,
        parsed.unmatched,
        rules,
        warnings=_shadowed(rules),
        case=parsed.case,
        exclude=tuple(parsed.exclude),
    )


def load_rules(path: Path) -> AclRules:
    """A rules file from disk; raises RulesError."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_RULES_BYTES + 1)
    except OSError as exc:
        raise RulesError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RulesError(f"{path} is not UTF-8 text") from None
    return parse_rules(text, path.name)
