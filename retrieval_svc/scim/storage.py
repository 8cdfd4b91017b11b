"""Where each SCIM key's users and groups live in its tenant, and how a change to them becomes
role grants. Each key is its own source (``scim:<key>``): its resources, the ids they are known
by and the grants they imply are its own, so two identity providers feeding one tenant never
re-record or take back each other's grants (``retrieval_svc.acl.owners``).

The protocol — validation, PATCH, filters, sorting, paging, ETags — is scim2-server's (built on
scim2-models, from the SCIM project that also writes scim2-tester); this module is the storage
under it. A tenant's resources are held by scim2-server's ``InMemoryStorage`` (its filters and
indices) and persisted in the policy database: every write stores the resource and applies the
grants it implies **in one transaction**, recorded in the permission history (actor
``scim:<key>``, source ``scim``). Service workers are separate processes, so each operation
first compares the tenant's write counter with the one it loaded, and reloads on a difference:
what one worker wrote, every worker serves.

A group gives the role of its own ``displayName`` to each active member user (nested groups
pass their members on), as ``user:<userName>``: the user id retrieval knows is the SCIM
``userName``. A group named like a user (``user:…``) or ``anyone``, or a ``userName`` that
cannot be a policy subject, is refused (400, ``invalidValue``) and nothing is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scim2_models import InvalidValueException, Resource, ResourceType
from scim2_server.memory import InMemoryStorage
from scim2_server.storage import AsyncScimStorage, SearchPage, projection, search_page

from retrieval_svc.acl import history, identities, tables
from retrieval_svc.acl.grant_sources import grantor
from retrieval_svc.acl.history import Actor
from retrieval_svc.acl.owners import OwnerRefused
from retrieval_svc.acl.policy_store import TABLE
from retrieval_svc.scim.checks import SCIM_IDS, check
from retrieval_svc.scim.grants import (
    Grant,
    RoleMap,
    grants_of,
    reconciled,
    user_ids,
)

if TYPE_CHECKING:
    import sqlalchemy as sa
    from scim2_models import ScimProvider
    from sqlalchemy.engine import Connection, Engine

T = TypeVar("T")


@functools.cache
def _tables() -> tuple[sa.MetaData, sa.Table, sa.Table]:
    import sqlalchemy as sa

    meta = sa.MetaData()
    resources = sa.Table(
        "scim_resource",
        meta,
        sa.Column("tenant", sa.String(128), primary_key=True),
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("body", sa.Text, nullable=True),  # NULL: deleted (a worker forgets it)
        sa.Column("serial", sa.Integer, nullable=False, index=True),  # the write that made it
        sa.Column("client", sa.String(255), nullable=True),  # the SCIM key's source: scim:<key>
    )
    state = sa.Table(
        "scim_state",
        meta,
        sa.Column("tenant", sa.String(128), primary_key=True),
        sa.Column("serial", sa.Integer, nullable=False),
    )
    return meta, resources, state


def ensure_tables(engine: Engine) -> None:
    """Create the SCIM tables (and the permission history's and aliases') if missing; give a
    ``scim_resource`` made before each key kept its own resources its ``client`` column (its
    rows, none yet, are taken by the first key that loads the tenant: ``TenantStorage``)."""
    import sqlalchemy as sa

    meta, resources, _ = _tables()
    meta.create_all(engine)
    columns = {c["name"] for c in sa.inspect(engine).get_columns(resources.name)}
    if "client" not in columns:
        with engine.begin() as conn:
            conn.execute(sa.text(f"ALTER TABLE {resources.name} ADD COLUMN client VARCHAR(255)"))
    tables.ensure_tables(engine, TABLE)
    identities.ensure_table(engine)


class TenantStorage(InMemoryStorage):
    """One SCIM key's users and groups in its tenant: in memory for the protocol, in the
    policy database for good, the implied grants applied with every write (see the module's
    docstring). Each key is its own source (``scim:<key>``): it sees, writes and grants only
    its own resources, so two identity providers feeding one tenant never share a grant."""

    def __init__(
        self,
        engine: Engine,
        provider: ScimProvider,
        tenant: str,
        actor: Callable[[], Actor],
        roles: RoleMap | None = None,
    ) -> None:
        super().__init__()
        self.engine, self.provider, self.tenant, self.actor = engine, provider, tenant, actor
        self.source = grantor(actor().name, "scim")  # scim:<key>: whose resources these are
        self.roles = roles  # the tenant's group → roles mapping (None: a group's own name)
        self._grants: set[Grant] | None = None  # what the resources in memory imply
        self.serial = -1  # (nothing loaded yet)

    def grants(self) -> set[Grant]:
        """The grants the resources in memory imply (kept between writes: a write computes
        them once, for after it)."""
        if self._grants is None:
            self._grants = grants_of(self.resources, self.tenant, self.roles)
        return self._grants

    def next_version(self) -> str:
        """A version no other worker or earlier process gave (the default counts from 1)."""
        return f'W/"{uuid.uuid4().hex[:16]}"'

    # Reading: the latest state, whichever worker wrote it.

    def _current_serial(self, conn: Connection) -> int:
        import sqlalchemy as sa

        _, _, state = _tables()
        found = conn.execute(sa.select(state.c.serial).where(state.c.tenant == self.tenant))
        return int(found.scalar() or 0)

    def refresh(self) -> None:
        """Take in what other workers (or processes) wrote since this one last looked: the
        rows written after the serial it holds (a deleted resource is a row without a body),
        or everything, the first time."""
        import sqlalchemy as sa

        _, resources, _ = _tables()
        if self.serial < 0:
            self._adopt()
        with self.engine.connect() as conn:
            serial = self._current_serial(conn)
            if serial == self.serial:
                return
            query = sa.select(resources.c.id, resources.c.kind, resources.c.body).where(
                resources.c.tenant == self.tenant, resources.c.client == self.source
            )
            if self.serial >= 0:
                query = query.where(resources.c.serial > self.serial)
            rows = conn.execute(query).all()
        self._grants = None
        models: dict[str, Any] = {
            str(rt.name): self.provider.model_for(rt) for rt in self.provider.resource_types
        }
        if self.serial < 0:  # (the first load, or after a failed write: everything)
            self.resources = [
                models[kind].model_validate(json.loads(body))
                for _, kind, body in rows
                if body is not None and kind in models
            ]
        else:
            # scim2-server's own indexing of one resource (InMemoryStorage keeps its indices
            # private; pinned below 0.9): a changed row costs its own re-index, not the
            # tenant's.
            for rid, kind, body in rows:
                self._remove((kind, rid))
                if body is not None and kind in models:
                    resource = models[kind].model_validate(json.loads(body))
                    self._store(resource, self._values_of(resource))
        self.serial = serial

    def _adopt(self) -> None:
        """Take the tenant's resources stored before each key kept its own (no ``client``):
        the first key to load the tenant after the upgrade is the one that wrote them, where
        one key fed it (as the documentation then said)."""
        import sqlalchemy as sa

        _, resources, _ = _tables()
        with self.engine.begin() as conn:
            conn.execute(
                sa.update(resources)
                .where(resources.c.tenant == self.tenant, resources.c.client.is_(None))
                .values(client=self.source)
            )
            identities.rename_source_in(conn, self.tenant, "scim", self.source)

    def get(self, resource_type: ResourceType, resource_id: str, **kwargs: Any) -> Any:
        with self.lock:
            self.refresh()
            return super().get(resource_type, resource_id, **kwargs)

    def search(self, resource_types: list[ResourceType], search_request: Any, **kwargs: Any) -> Any:
        with self.lock:
            self.refresh()
            return super().search(resource_types, search_request, **kwargs)

    # Writing: the resource and its grants, in one transaction.

    def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        check(resource, self.tenant)
        with self.lock:
            self.refresh()
            before = self.grants()
            stored = super().create(resource_type, resource)
            self._commit(before, f"create {resource_type.name}", upsert=stored)
            return stored

    def update(
        self,
        resource_type: ResourceType,
        resource: Resource[Any],
        *,
        expected_version: str | None = None,
    ) -> Resource[Any]:
        check(resource, self.tenant)
        with self.lock:
            self.refresh()
            before = self.grants()
            stored = super().update(resource_type, resource, expected_version=expected_version)
            self._commit(before, f"update {resource_type.name}", upsert=stored)
            return stored

    def delete(
        self,
        resource_type: ResourceType,
        resource_id: str,
        *,
        expected_version: str | None = None,
    ) -> None:
        with self.lock:
            self.refresh()
            before = self.grants()
            super().delete(resource_type, resource_id, expected_version=expected_version)
            self._commit(before, f"delete {resource_type.name}", removed=resource_id)

    def _commit(
        self,
        before: set[Grant],
        action: str,
        *,
        upsert: Resource[Any] | None = None,
        removed: str | None = None,
    ) -> None:
        """Persist one write and the grants it changes, or undo it in memory and raise."""
        import sqlalchemy as sa

        _, resources, state = _tables()
        self._grants = None
        after = self.grants()
        try:
            with self.engine.begin() as conn:
                changes = reconciled(conn, self.tenant, self.source, before, after)
                serial = self._current_serial(conn) + 1
                key = upsert.id if upsert is not None else removed
                mine = sa.and_(
                    resources.c.tenant == self.tenant,
                    resources.c.id == key,
                    resources.c.client == self.source,
                )
                old = conn.execute(
                    sa.select(resources.c.kind, resources.c.body).where(mine)
                ).first()
                kinds = old.kind if old is not None else None
                conn.execute(sa.delete(resources).where(mine))
                if upsert is not None:
                    assert upsert.meta is not None
                    body: str | None = json.dumps(
                        upsert.model_dump(mode="json"), ensure_ascii=False
                    )
                    kind = upsert.meta.resource_type
                else:
                    body, kind = None, kinds or ""  # a tombstone, for the other workers
                conn.execute(
                    sa.insert(resources).values(
                        tenant=self.tenant,
                        id=key,
                        kind=kind,
                        body=body,
                        serial=serial,
                        client=self.source,
                    )
                )
                bumped = conn.execute(
                    sa.update(state).where(state.c.tenant == self.tenant).values(serial=serial)
                )
                if not bumped.rowcount:
                    conn.execute(sa.insert(state).values(tenant=self.tenant, serial=serial))
                if changes:  # (a line already so is neither changed nor recorded)
                    try:
                        history.apply_in(conn, TABLE, self.actor(), action, changes)
                    except OwnerRefused as exc:  # (a role a directory sync owns: nothing stored)
                        raise InvalidValueException(detail=str(exc)) from None
                if kind == "User":  # who the user is known as: its userName, e-mails, externalId
                    was, _ = user_ids(
                        json.loads(old.body) if old is not None and old.body else None
                    )
                    now, ids = user_ids(json.loads(body) if body else None)
                    rows, _ = (  # (an id too long to store is refused when it is written)
                        identities.entries_of(self.tenant, self.source, now, ids, SCIM_IDS)
                        if now
                        else (set(), [])
                    )
                    identities.replace_people_in(  # (this key's ids of them: each key its own)
                        conn, self.tenant, self.source, {p for p in (was, now) if p}, rows
                    )
        except Exception:
            self.serial = -1  # what memory holds was not committed: reload it next time
            self._grants = None
            raise
        self.serial = serial


class ThreadedStorage(AsyncScimStorage):
    """A ``TenantStorage`` for scim2-server's ASGI application: each call in a thread (the
    database is never waited for on the event loop)."""

    supports_cursors = True

    def __init__(self, storage: TenantStorage) -> None:
        self.storage = storage

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def get(
        self, resource_type: ResourceType, resource_id: str, *, response_parameters: Any = None
    ) -> Resource[Any]:
        more = projection(self.storage, response_parameters)
        found: Resource[Any] = await self._run(self.storage.get, resource_type, resource_id, **more)
        return found

    async def search(
        self, resource_types: list[ResourceType], search_request: Any, *, position: Any = None
    ) -> SearchPage:
        return await self._run(search_page, self.storage, resource_types, search_request, position)

    async def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        return await self._run(self.storage.create, resource_type, resource)

    async def update(
        self,
        resource_type: ResourceType,
        resource: Resource[Any],
        *,
        expected_version: str | None = None,
    ) -> Resource[Any]:
        return await self._run(
            self.storage.update, resource_type, resource, expected_version=expected_version
        )

    async def delete(
        self, resource_type: ResourceType, resource_id: str, *, expected_version: str | None = None
    ) -> None:
        await self._run(
            self.storage.delete, resource_type, resource_id, expected_version=expected_version
        )

    @contextlib.asynccontextmanager
    async def operation(self) -> AsyncIterator[None]:
        yield
