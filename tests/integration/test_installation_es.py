"""Someone else's indices are left alone: each index under an alias carries the id of the
installation that first wrote it, and the indexer and the service of another installation
refuse it (naming the cluster without credentials, the other installation, and what to do)
unless told to adopt it; each says which cluster it writes to."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch
from typer.testing import CliRunner

from indexer.cli import app as indexer_cli
from retrieval_svc.errors import ConfigurationError
from retrieval_svc.search.index import ensure_index
from retrieval_svc.settings import IndexSettings
from tests.support import ES_URL, app_client, make_settings

pytestmark = pytest.mark.english_lines  # (it reads the command lines' English)

STAMP = "installation"  # (the index mapping's `_meta` key: search/installation.py)

# The cluster's URL with a user and password in it: Elasticsearch without security ignores
# them, and no line may repeat them.
_parts = urlsplit(ES_URL)
SECRET = "s3cret-pw"
ES_WITH_CREDENTIALS = f"{_parts.scheme}://elastic:{SECRET}@{_parts.netloc}"
CLUSTER = f"{_parts.hostname}:{_parts.port}"


@pytest.fixture
def shared_alias(es_sync: Elasticsearch) -> Iterator[str]:
    """An alias of this test alone, removed after it."""
    alias = f"rsvc-test-inst-{uuid.uuid4().hex[:8]}"
    yield alias
    es_sync.options(ignore_status=404).indices.delete(index=f"{alias}.*")
    es_sync.options(ignore_status=404).indices.delete_index_template(name=f"{alias}-template")


def index(alias: str, folder: Path, kb: str, installation: str, **more: str) -> tuple[int, str]:
    env = {
        "RSVC_ES_URL": ES_WITH_CREDENTIALS,
        "RSVC_INDEX_ALIAS": alias,
        "RSVC_EMBEDDER": "none",
        "RSVC_INSTALLATION_ID": installation,
        **more,
    }
    done = CliRunner().invoke(indexer_cli, ["index", str(folder), "--knowledge-id", kb], env=env)
    return done.exit_code, done.output


def chunks(es_sync: Elasticsearch, alias: str, kb: str) -> int:
    es_sync.indices.refresh(index=f"{alias}.*")
    query = {"term": {"knowledge_id": kb}}
    return int(es_sync.count(index=f"{alias}.*", query=query)["count"])


def stamps(es_sync: Elasticsearch, alias: str) -> set[str | None]:
    mappings = es_sync.indices.get_mapping(index=f"{alias}.*")
    return {body["mappings"].get("_meta", {}).get(STAMP) for body in mappings.values()}


@pytest.fixture
def share(tmp_path: Path) -> Path:
    folder = tmp_path / "share"
    folder.mkdir()
    (folder / "通知.md").write_text("# 通知\n\n下周停电。\n", encoding="utf-8")
    return folder


def test_the_indexer_refuses_another_installation_s_indices(
    shared_alias: str, share: Path, es_sync: Elasticsearch
) -> None:
    code, said = index(shared_alias, share, "team-a-kb", "team-a")
    assert code == 0, said
    # It said which cluster it writes to, and never the password.
    assert f"Elasticsearch at http://{CLUSTER}: indices under alias {shared_alias}" in said
    assert SECRET not in said
    assert stamps(es_sync, shared_alias) == {"team-a"}

    code, said = index(shared_alias, share, "team-b-kb", "team-b")
    assert code == 2, said
    assert "belongs to another installation, team-a (this one is team-b)" in said, said
    assert CLUSTER in said and SECRET not in said
    assert "RSVC_INSTALLATION_ADOPT=true" in said and "RSVC_INSTALLATION_ID=team-a" in said
    assert chunks(es_sync, shared_alias, "team-b-kb") == 0  # nothing written
    assert stamps(es_sync, shared_alias) == {"team-a"}

    code, said = index(shared_alias, share, "team-b-kb", "team-b", RSVC_INSTALLATION_ADOPT="true")
    assert code == 0, said  # adopted on purpose: now team-b's
    assert chunks(es_sync, shared_alias, "team-b-kb") == 1
    assert stamps(es_sync, shared_alias) == {"team-b"}
    code, said = index(shared_alias, share, "team-a-kb", "team-a")
    assert code == 2 and "another installation, team-b" in said, said


def test_the_refusal_speaks_chinese_under_a_chinese_locale(shared_alias: str, share: Path) -> None:
    assert index(shared_alias, share, "kb", "team-a")[0] == 0
    code, said = index(shared_alias, share, "kb", "team-b", RSVC_LANG="zh")
    assert code == 2
    assert "属于另一个安装 team-a（本安装为 team-b）：什么都没写" in said, said
    assert f"Elasticsearch 位于 http://{CLUSTER}" in said and SECRET not in said


@pytest.mark.anyio
async def test_indices_from_before_the_stamp_are_stamped_by_their_first_writer(
    shared_alias: str, es: AsyncElasticsearch, es_sync: Elasticsearch, share: Path
) -> None:
    await ensure_index(es, shared_alias, tenant="default")  # as an earlier version made it
    assert stamps(es_sync, shared_alias) == {None}
    assert (await asyncio.to_thread(index, shared_alias, share, "kb", "team-a"))[0] == 0
    assert stamps(es_sync, shared_alias) == {"team-a"}
    assert (await asyncio.to_thread(index, shared_alias, share, "kb", "team-b"))[0] == 2


@pytest.mark.anyio
@pytest.mark.parametrize("manage_index", [True, False])
async def test_the_service_refuses_to_start_on_another_installation_s_indices(
    shared_alias: str, es: AsyncElasticsearch, es_sync: Elasticsearch, manage_index: bool
) -> None:
    settings = make_settings(shared_alias, installation_id="team-a", tenants=["acme"])
    async with app_client(settings) as client:
        assert (await client.get("/readyz")).status_code == 200
    other = make_settings(
        shared_alias, installation_id="team-b", tenants=["acme"], manage_index=manage_index
    )
    with pytest.raises(ConfigurationError, match="another installation, team-a") as refused:
        async with app_client(other):
            pass
    assert shared_alias in str(refused.value) and "RSVC_INSTALLATION_ADOPT" in str(refused.value)
    assert stamps(es_sync, shared_alias) == {"team-a"}
    adopting = make_settings(
        shared_alias, installation_id="team-b", tenants=["acme"], installation_adopt=True
    )
    async with app_client(adopting) as client:
        assert (await client.get("/readyz")).status_code == 200
    assert stamps(es_sync, shared_alias) == {"team-b"}


def test_an_installation_that_names_none_is_the_folder_it_runs_from() -> None:
    """Two checkouts on one machine are two installations; every process of one agrees."""
    root = Path(__file__).resolve().parents[2]
    settings = IndexSettings(_env_file=None)  # type: ignore[call-arg]
    assert settings.installation == str(root)
    named = IndexSettings(_env_file=None, installation_id=" team-a ")  # type: ignore[call-arg]
    assert named.installation == "team-a"
