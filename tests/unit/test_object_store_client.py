"""Which endpoint the indexer's bucket client talks to (indexer.sources.object_store.s3_client):
the names each ecosystem's users set, S3's own endpoint before the shared one."""

from __future__ import annotations

import pytest

from indexer.sources.object_store import ObjectStoreOptions, s3_client


@pytest.fixture(autouse=True)
def _no_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "OSS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def test_the_bucket_s_own_endpoint_is_taken_before_the_shared_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (a bucket on one server, the watcher's queue on another: the queue's is not the bucket's)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9324")
    assert s3_client("s3", ObjectStoreOptions()).meta.endpoint_url == "http://127.0.0.1:9000"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8333")
    client = s3_client("s3", ObjectStoreOptions())
    assert client.meta.endpoint_url == "http://127.0.0.1:8333"
    assert client.meta.config.s3 == {"addressing_style": "path"}  # (loopback: path-style)


def test_an_endpoint_given_on_the_command_line_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8333")
    client = s3_client("s3", ObjectStoreOptions(endpoint="https://s3.example.com"))
    assert client.meta.endpoint_url == "https://s3.example.com"
    assert client.meta.config.s3 == {"addressing_style": "auto"}


def test_oss_ignores_the_aws_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8333")
    monkeypatch.setenv("OSS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("OSS_ACCESS_KEY_SECRET", "secret")
    client = s3_client("oss", ObjectStoreOptions(region="cn-hangzhou"))
    assert client.meta.endpoint_url == "https://s3.oss-cn-hangzhou.aliyuncs.com"
