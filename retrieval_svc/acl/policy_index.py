"""A loaded policy, indexed for requests, and handed between processes in pieces.

pycasbin's domain role manager rebuilds a role manager for the domain on every
``get_implicit_roles_for_user`` / ``enforce`` call — quadratic in the policy's lines (20,000
users stalled a request for minutes) — so requests are answered from plain dictionaries built
here once per load. The policy watcher compiles an index in a child process and hands it back
in pickled pieces (``PolicyIndex.pieces`` / ``assemble``).
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field

from casbin.util import key_match

from retrieval_svc.acl.directory_sids import decode
from retrieval_svc.acl.identities import Alias, Directory
from retrieval_svc.acl.policy_store import READ, PolicySource, Rule, Skipped
from retrieval_svc.key_entry import SID_PREFIX
from retrieval_svc.tenancy import EVERY_TENANT

PIECE_SIZE = 2000  # index entries per pickled piece handed back by the compiling child


@dataclass(slots=True)
class PolicyIndex:
    """One loaded policy, indexed for requests.

    pycasbin parses and validates the policy; the questions requests ask are answered from
    plain dictionaries built here once per load, because pycasbin's domain role manager
    rebuilds a role manager for the domain on every ``get_implicit_roles_for_user`` /
    ``enforce`` call — quadratic in the policy's lines (20,000 users stalled a request for
    minutes). The semantics are the model's: ``g, child, parent, tenant`` links within one
    tenant; ``p, subject, tenant, kb-pattern, read``, the tenant matched exactly (``*`` alone:
    every tenant) and the knowledge base with ``keyMatch``.
    """

    parents: dict[str, dict[str, tuple[str, ...]]]  # tenant → name → parent roles
    grants: dict[str, tuple[tuple[str, str, str], ...]]  # subject → (dom, obj, act) patterns
    expansions: dict[tuple[str, str], frozenset[str]]
    skipped: tuple[Skipped, ...] = ()  # stored lines not read into the policy
    directory: Directory = field(default_factory=lambda: Directory({}, {}))  # who is who
    # Each person's SIDs as a directory sync stored them (``directory_sids``): tenant →
    # subject → encoded text, decoded for a caller when asked (``sid_roles``) and cached.
    sids: dict[str, dict[str, str]] = field(default_factory=dict)
    sid_cache: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        policy: Iterable[Rule],
        grouping: Iterable[Rule],
        skipped: Iterable[Skipped] = (),
        aliases: Iterable[Alias] = (),
        sids: Iterable[tuple[str, str, str]] = (),
    ) -> PolicyIndex:
        parents: dict[str, dict[str, list[str]]] = {}
        for child, parent, tenant, *_ in grouping:
            parents.setdefault(tenant, {}).setdefault(child, []).append(parent)
        grants: dict[str, list[tuple[str, str, str]]] = {}
        for subject, dom, obj, act, *_ in policy:
            grants.setdefault(subject, []).append((dom, obj, act))
        held: dict[str, dict[str, str]] = {}
        for tenant, subject, text in sids:
            mine = held.setdefault(tenant, {})
            # (two syncs giving one person SIDs: the texts joined decode to their union)
            mine[subject] = f"{mine[subject]};{text}" if subject in mine else text
        return cls(
            {t: {c: tuple(ps) for c, ps in names.items()} for t, names in parents.items()},
            {s: tuple(g) for s, g in grants.items()},
            {},
            tuple(skipped),
            Directory.of(aliases),
            held,
        )

    def pieces(self, size: int = PIECE_SIZE) -> list[bytes]:
        """This index as pickled pieces of at most ``size`` entries each.

        A child process compiles the policy and hands it back in pieces, so the parent can
        unpickle one piece at a time and let requests run in between (one 100,000-user
        index unpickled at once holds the interpreter for ~40 ms).
        """
        out = [pickle.dumps(("grants", list(self.grants.items())))]
        out.append(pickle.dumps(("skipped", list(self.skipped))))
        out.append(pickle.dumps(("people", list(self.directory.people.items()))))
        for tenant, known in self.directory.aliases.items():
            aliases = list(known.items())
            for i in range(0, len(aliases), size):
                out.append(pickle.dumps((("aliases", tenant), aliases[i : i + size])))
        for tenant, names in self.parents.items():
            items = list(names.items())
            for i in range(0, len(items), size):
                out.append(pickle.dumps((("tenant", tenant), items[i : i + size])))
        for tenant, people in self.sids.items():
            rows = list(people.items())
            for i in range(0, len(rows), size):
                out.append(pickle.dumps((("sids", tenant), rows[i : i + size])))
        return out

    @classmethod
    async def assemble(cls, pieces: Iterable[bytes]) -> PolicyIndex:
        """Rebuild an index from ``pieces``, yielding to the event loop between pieces."""
        parents: dict[str, dict[str, tuple[str, ...]]] = {}
        grants: dict[str, tuple[tuple[str, str, str], ...]] = {}
        skipped: list[Skipped] = []
        directory = Directory({}, {})
        sids: dict[str, dict[str, str]] = {}
        for piece in pieces:
            kind, items = pickle.loads(piece)
            if kind == "grants":
                grants.update(items)
            elif kind == "skipped":
                skipped.extend(items)
            elif kind == "people":
                directory.people.update(items)
            elif kind[0] == "aliases":
                directory.aliases.setdefault(kind[1], {}).update(items)
            elif kind[0] == "sids":
                sids.setdefault(kind[1], {}).update(items)
            else:
                parents.setdefault(kind[1], {}).update(items)
            await asyncio.sleep(0)
        return cls(parents, grants, {}, tuple(skipped), directory, sids)

    def sid_roles(self, subject: str, tenant: str) -> frozenset[str]:
        """The ``sid:`` roles a directory sync gives ``subject`` in ``tenant`` (cached for this
        policy's lifetime: a sync's write is a new policy, and a new cache)."""
        text = self.sids.get(tenant, {}).get(subject)
        if text is None:
            return frozenset()
        key = (subject, tenant)
        found = self.sid_cache.get(key)
        if found is None:
            found = frozenset(SID_PREFIX + sid for sid in decode(text))
            if len(self.sid_cache) >= 20_000:
                self.sid_cache.clear()
            self.sid_cache[key] = found
        return found

    def implicit(self, name: str, tenant: str) -> frozenset[str]:
        """``name``'s inherited roles in ``tenant`` (cached for this policy's lifetime)."""
        links = self.parents.get(tenant)
        if not links or name not in links:
            return frozenset()
        key = (name, tenant)
        found = self.expansions.get(key)
        if found is None:
            seen: set[str] = set()
            todo = list(links[name])
            while todo:  # breadth over the hierarchy; cycles stop at seen names
                role = todo.pop()
                if role not in seen:
                    seen.add(role)
                    todo.extend(links.get(role, ()))
            found = frozenset(seen)
            if len(self.expansions) < 100_000:
                self.expansions[key] = found
        return found

    def grant(self, subject: str, tenant: str, knowledge_id: str) -> bool:
        """Whether a p line of ``subject`` lets it read ``knowledge_id`` in ``tenant``."""
        return any(
            act == READ and (dom == tenant or dom == EVERY_TENANT) and key_match(knowledge_id, obj)
            for dom, obj, act in self.grants.get(subject, ())
        )


def compile_pieces(source: PolicySource) -> list[bytes]:
    """Load, validate and index ``source``; the index in pickled pieces (runs in a child
    process: pycasbin's parsing is pure Python and would hold the service's interpreter)."""
    return index_of(source).pieces()


def index_of(source: PolicySource) -> PolicyIndex:
    """``source`` read and indexed; raises PolicyError when it cannot be read at all."""
    read = source.rules()
    return PolicyIndex.of(read.policy, read.grouping, read.skipped, read.aliases, read.sids)
