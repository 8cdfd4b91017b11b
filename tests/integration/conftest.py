"""Services for integration tests: the real Elasticsearch the suite started, a private index
loaded with the test corpus, a web-provider server, an S3 server, PostgreSQL, OpenLDAP, and an
Active Directory domain controller (Samba's).

``RSVC_ES_URL`` (set by scripts/test) names the cluster; it is read once at import, before
the autouse fixture clears every ``RSVC_`` variable so tests build ``Settings`` explicitly.
An unreachable Elasticsearch fails the run: integration tests are never skipped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch, Elasticsearch

from retrieval_svc.search.index import template_name
from tests.support import ES_URL, S3_KEY_ID, S3_SECRET, SERVERS_DIR
from tests.support import samba_ad as samba_ad_support
from tests.support.corpus import load_corpus
from tests.support.fake_provider import FakeProvider, ServerThread
from tests.support.samba_ad import DomainController

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _command_lines_language(
    request: pytest.FixtureRequest, _clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command lines and the service speak the terminal's language (``LANG``), as they
    would for the person running the suite: a run under ``zh_CN.UTF-8`` exercises the Chinese
    lines everywhere. A module whose tests read English sentences says so
    (``pytest.mark.english_lines``) and gets ``RSVC_LANG=en`` — the locale it reads, set
    explicitly. The Chinese lines of those modules are held to the same rows by tests that
    choose ``zh`` themselves (test_words_es, the unit tests' locale runs)."""
    if request.node.get_closest_marker("english_lines") is not None:
        monkeypatch.setenv("RSVC_LANG", "en")


@pytest.fixture(scope="session")
def es_sync() -> Iterator[Elasticsearch]:
    """A plain client for setup and inspection; fails the run if Elasticsearch is down."""
    client = Elasticsearch(ES_URL, request_timeout=30)
    try:
        health = client.cluster.health(wait_for_status="yellow", timeout="30s")
    except Exception as exc:
        pytest.fail(
            f"Elasticsearch at {ES_URL} is unreachable ({exc}). Start it with "
            "`scripts/es.sh start` or run the suite with `scripts/test`.",
            pytrace=False,
        )
    assert health["status"] in ("yellow", "green")
    yield client
    client.close()


@pytest.fixture(scope="session")
def alias(es_sync: Elasticsearch) -> Iterator[str]:
    """An index alias private to this test session; removed afterwards."""
    name = f"rsvc-test-{uuid.uuid4().hex[:8]}"
    yield name
    es_sync.options(ignore_status=404).indices.delete(index=f"{name}-*,{name}.*")
    es_sync.options(ignore_status=404).indices.delete_index_template(name=template_name(name))


@pytest.fixture
async def es(es_sync: Elasticsearch) -> AsyncIterator[AsyncElasticsearch]:
    client = AsyncElasticsearch(ES_URL, request_timeout=30)
    yield client
    await client.close()


@pytest.fixture(scope="session")
def corpus(es_sync: Elasticsearch, alias: str) -> str:
    """The alias, loaded with the test corpus (see tests/corpus.py)."""
    load_corpus(es_sync, alias)
    return alias


@pytest.fixture(scope="session")
def provider_server() -> Iterator[FakeProvider]:
    """A local server speaking Bocha's, Tavily's and Baidu's formats (tests/fake_provider.py)."""
    fake = FakeProvider()
    with ServerThread(fake.app()) as server:
        fake.url = f"http://127.0.0.1:{server.port}"
        yield fake


@pytest.fixture
def provider(provider_server: FakeProvider) -> FakeProvider:
    provider_server.reset()
    return provider_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3-protocol server (moto in server mode) on loopback; its endpoint URL."""
    from moto.server import ThreadedMotoServer

    from tests.support.fake_provider import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_server: str) -> Iterator[tuple[Any, str]]:
    """A fresh bucket on the suite's S3 server: a boto3 client and its name."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3_server,
        region_name="us-east-1",
        aws_access_key_id=S3_KEY_ID,
        aws_secret_access_key=S3_SECRET,
    )
    name = f"kb-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=name)
    yield client, name


@contextlib.contextmanager
def _scripted(script: str, what: str) -> Iterator[str]:
    """``scripts/<script> start PORT`` on a free loopback port, its printed URL, then ``stop``.
    Failing to start fails the tests that need it — never a skip."""
    from tests.support.fake_provider import free_port

    path = ROOT / "scripts" / script
    port = str(free_port())
    env = {**os.environ, **({"RSVC_SERVERS_DIR": SERVERS_DIR} if SERVERS_DIR else {})}
    started = subprocess.run(
        [str(path), "start", port], capture_output=True, text=True, timeout=600, check=False,
        env=env,
    )  # fmt: skip
    if started.returncode != 0:
        pytest.fail(f"could not start {what} with {path}:\n{started.stderr}", pytrace=False)
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(
            [str(path), "stop", port], capture_output=True, timeout=120, check=False, env=env
        )


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL the suite starts (scripts/pg.sh: Debian's package, initdb into a
    fresh folder, a free loopback port); its SQLAlchemy URL."""
    with _scripted("pg.sh", "PostgreSQL") as url:
        yield url


@pytest.fixture(scope="session")
def ldap_server() -> Iterator[str]:
    """A real OpenLDAP server the suite starts (scripts/ldap.sh: Debian's slapd, a fresh mdb
    database for dc=example,dc=org, StartTLS with a throwaway CA, a free loopback port); its
    URL."""
    with _scripted("ldap.sh", "slapd") as url:
        yield url


@pytest.fixture(scope="session")
def samba_ad() -> Iterator[DomainController]:
    """A real Active Directory domain controller the suite starts (scripts/samba-ad.sh: Debian's
    Samba AD DC on a loopback address of its own, LDAPS, Kerberos and an SMB share), holding
    tests.support.samba_ad.SPEC's people and groups. Failing to start fails the tests that
    need it — never a skip."""
    try:
        dc = samba_ad_support.start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        dc.seed(samba_ad_support.SPEC)
        yield dc
    finally:
        samba_ad_support.stop(dc)


@pytest.fixture(params=["sqlite", "postgresql"])
def policy_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty policy database: a SQLite file, or a new database in the suite's
    PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'policy.db'}"
    import sqlalchemy

    server: str = request.getfixturevalue("postgres_url")
    name = f"policy_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"
