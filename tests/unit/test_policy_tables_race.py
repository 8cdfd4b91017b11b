"""Two processes making the policy database's tables at once: the one whose CREATE loses the
race (its check said missing, the other made it first) still succeeds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from retrieval_svc.acl.policy_store import DEFAULT_MODEL, PolicyDatabase

# Every table the policy database makes, through the two ways that make them: the store's
# ensure() (the service, the commands) and the history's read (`policy history`, the console).
TABLES = ["policy_event", "grant_source", "directory_owned_role", "directory_sid"]


@pytest.mark.parametrize("way", ["ensure", "history"])
@pytest.mark.parametrize("table", TABLES)
def test_tables_made_by_another_process_between_check_and_create(
    tmp_path: Path, table: str, way: str
) -> None:
    url = f"sqlite:///{tmp_path / 'policy.db'}"
    store = PolicyDatabase(DEFAULT_MODEL, url)
    other = sa.create_engine(url)
    engine = store.engine()
    raced: list[str] = []

    def first_create(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().startswith(f"CREATE TABLE {table} ") and not raced:
            raced.append(statement)  # (the other process makes it just before this one)
            with other.begin() as theirs:
                theirs.exec_driver_sql(statement)

    event.listen(engine, "before_cursor_execute", first_create)
    try:
        if way == "ensure":
            store.ensure()
        else:
            store.history(since=datetime.now(UTC) - timedelta(days=1))
    finally:
        event.remove(engine, "before_cursor_execute", first_create)
        other.dispose()
    assert raced, "the race was not played"
    assert sa.inspect(engine).has_table(table)
    store.ensure()  # (and again, nothing to make)
