"""Faults (issue #8): a slow cluster hits the deadline, tokens of the wrong algorithm are
refused, and an indexer killed mid-run converges when run again."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from elasticsearch import Elasticsearch

from retrieval_svc.acl.casbin_acl import AccessControl
from retrieval_svc.auth.identity import Claims, resolve_principal
from retrieval_svc.auth.keys import ApiKeyConfig, IdentityMode, hash_key
from retrieval_svc.errors import InvalidPrincipalToken
from tests.corpus import SAMPLES_KB
from tests.support import ES_URL, app_client, auth, make_settings
from tests.tcp_proxy import TcpProxy

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.anyio
async def test_slow_cluster_gives_504_within_the_deadline(corpus: str) -> None:
    body = {"knowledge_id": SAMPLES_KB, "query": "巡更", "retrieval_setting": {"top_k": 2}}
    with TcpProxy(ES_URL) as proxy:
        settings = make_settings(corpus, es_url=proxy.url, request_deadline_s=0.5)
        async with app_client(settings) as c:
            assert (await c.post("/retrieval", json=body, headers=auth("anon"))).status_code == 200
            proxy.delay_s = 2.0
            started = time.perf_counter()
            slow = await c.post("/retrieval", json=body, headers=auth("anon"))
            elapsed = time.perf_counter() - started
            proxy.delay_s = 0.0
            assert slow.status_code == 504 and slow.json()["error_code"] == 5002
            assert elapsed < 1.5


def test_asymmetric_and_confused_tokens_are_refused() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims = {"sub": "x", "roles": ["admin"], "tenant": "t", "exp": int(time.time()) + 60}
    key = ApiKeyConfig(
        name="s",
        sha256=hash_key("signed-key-123456"),
        tenant="t",
        mode=IdentityMode.SIGNED,
        token_secret="a-real-random-secret-" + "k" * 20,
    )
    acl = AccessControl()
    # A token signed with RSA: only HS256 is accepted.
    with pytest.raises(InvalidPrincipalToken):
        resolve_principal(key, Claims(token=jwt.encode(claims, private, algorithm="RS256")), acl)

    # RS/HS confusion: an attacker who knows only a public key uses it as the HMAC secret.
    # (PyJWT refuses to do this, so the token is put together by hand.)
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = (
        b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        + "."
        + b64(json.dumps(claims).encode())
    )
    forged_sig = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    with pytest.raises(InvalidPrincipalToken):
        resolve_principal(key, Claims(token=f"{signing_input}.{b64(forged_sig)}"), acl)


def _count(es: Elasticsearch, alias: str, kb: str) -> int:
    es.indices.refresh(index=alias)
    return int(es.count(index=alias, query={"term": {"knowledge_id": kb}})["count"])


def test_indexer_killed_mid_run_converges(
    es_sync: Elasticsearch, corpus: str, tmp_path: Path
) -> None:
    from bench.corpus import write_corpus

    folder = write_corpus(tmp_path, 6000, seed=5)
    env = {**os.environ, "RSVC_ES_URL": ES_URL, "RSVC_INDEX_ALIAS": corpus}
    cli = [
        sys.executable,
        "-c",
        "from indexer.cli import app; app()",
        "index",
        str(folder),
        "--knowledge-id",
        "killed",
        "--json",
    ]
    dry = subprocess.run([*cli, "--dry-run"], env=env, capture_output=True, text=True, check=True)
    expected = json.loads(dry.stdout)["chunks_indexed"]
    child = subprocess.Popen(cli, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while _count(es_sync, corpus, "killed") == 0:  # kill once the first batch landed
        assert time.monotonic() < deadline and child.poll() is None, "indexer never wrote"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    partial = _count(es_sync, corpus, "killed")
    assert 0 < partial < expected, "the kill should land mid-run"
    rerun = subprocess.run(cli, env=env, capture_output=True, text=True, check=False)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert _count(es_sync, corpus, "killed") == expected  # nothing lost, nothing duplicated
    assert report["documents_skipped"] > 0  # the documents written before the kill
    again = json.loads(
        subprocess.run(cli, env=env, capture_output=True, text=True, check=True).stdout
    )
    assert again["documents_indexed"] == 0 and _count(es_sync, corpus, "killed") == expected


@pytest.mark.anyio
async def test_cluster_lost_mid_traffic(corpus: str) -> None:
    import asyncio

    body = {"knowledge_id": SAMPLES_KB, "query": "巡更 巡检", "retrieval_setting": {"top_k": 3}}
    answers: list[tuple[float, int, int | None, float]] = []  # (t, status, code, duration)
    with TcpProxy(ES_URL) as proxy:
        async with app_client(make_settings(corpus, es_url=proxy.url)) as c:
            started = time.perf_counter()

            async def traffic() -> None:
                while time.perf_counter() - started < 4.0:
                    t0 = time.perf_counter()
                    resp = await c.post("/retrieval", json=body, headers=auth("anon"))
                    code = resp.json().get("error_code") if resp.status_code != 200 else None
                    answers.append((t0 - started, resp.status_code, code, time.perf_counter() - t0))

            async def chaos() -> None:
                await asyncio.sleep(1.0)
                proxy.cut()  # connections in flight are dropped, new ones refused
                await asyncio.sleep(1.5)
                proxy.restore()

            await asyncio.gather(*(traffic() for _ in range(4)), chaos())
    statuses = {(s, code) for _, s, code, _ in answers}
    assert statuses <= {(200, None), (503, 5001)}, statuses
    assert (503, 5001) in statuses and (200, None) in statuses
    assert max(d for _, s, _, d in answers if s == 503) < 2.0
    late = [s for t, s, _, _ in answers if t > 3.0]
    assert late and all(s == 200 for s in late), "no recovery after the cluster came back"
