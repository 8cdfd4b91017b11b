"""A bucket's events as whoever can send them does (design.md §16): a queue receives whatever
anyone puts in it, a listener whatever anyone POSTs. ``retrieval-indexer watch`` as an
operator runs it, against the real Elasticsearch and the suite's S3 server with its SQS
notifications: unreadable messages beside a real restricting re-tag — the re-tag is in force,
each unreadable message is named (the status record) and moved to the queue's dead-letter
queue; pushed events (``--listen``) are taken only with the token, in the formats real
servers send (MinIO's webhook body; OSS's through MNS and EventBridge); MNS's own signed
push (``--listen-mns``) only when its signature verifies."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
from elasticsearch import Elasticsearch

from tests.integration.test_watch_es import (  # noqa: F401 (watchers: a fixture)
    CLI,
    RULES,
    Watching,
    env,
    stored,
    until,
    watchers,
)
from tests.support import S3_KEY_ID, S3_SECRET
from tests.support.mns import cert_server, certificate, new_key, notification, signed
from tests.support.mns import post as post_signed

POISON = [
    '{"Records":[{"s3":"x"}]}',
    "[" * 5000 + "]" * 5000,
    '"a string where an object is expected"',
    '{"Records": "x"}',
    "not json at all",
    "x" * 250_000,
]


def shown_watchers(alias: str, kb: str) -> list[dict[str, Any]]:
    run = subprocess.run([*CLI, "show", "--knowledge-id", kb, "--json"], env=env(alias),
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    return list((json.loads(run.stdout).get("last_run") or {}).get("watchers") or [])


STEADY = ["--lease-ttl", "120"]  # (a busy machine's late renewal is not what is tested here)


def test_unreadable_queue_messages_are_named_moved_aside_and_hold_nothing_back(
    bucket: tuple[Any, str],
    s3_server: str,
    alias: str,
    es_sync: Elasticsearch,
    watchers: list[Watching],  # noqa: F811
    tmp_path: Path,
) -> None:
    client, name = bucket
    sqs = boto3.client("sqs", endpoint_url=s3_server, region_name="us-east-1",
                       aws_access_key_id=S3_KEY_ID, aws_secret_access_key=S3_SECRET)  # fmt: skip
    dead = sqs.create_queue(QueueName=f"{name}-dead")["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])
    url = sqs.create_queue(QueueName=f"{name}-events", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dead_arn["Attributes"]["QueueArn"], "maxReceiveCount": "5"})})[
        "QueueUrl"]  # fmt: skip
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    client.put_bucket_notification_configuration(Bucket=name, NotificationConfiguration={
        "QueueConfigurations": [{"QueueArn": arn["QueueArn"], "Events": [
            "s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectTagging:*"]}]})  # fmt: skip
    key = "docs/公共/年报 2026.md"
    client.put_object(Bucket=name, Key=key, Body="# 年报\n\n利润。".encode())
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    kb = "watch-poison"
    argv = [f"s3://{name}/docs", "--knowledge-id", kb, "--acl-rules", str(tmp_path / "rules.yaml"),
            "--roles-tag", "access_roles", "--health-port", "0", "--workers", "1",
            "--events", f"sqs://{name}-events", "--rescan", "600", *STEADY]  # fmt: skip
    watcher = Watching(argv, env(alias, s3=s3_server), tmp_path / "watch.log")
    watchers.append(watcher)
    now = lambda: stored(es_sync, alias, kb)  # noqa: E731
    until(lambda: now() == {"公共/年报 2026.md": ()}, "first pass", watcher)
    sent = [0]
    flowing = threading.Event()

    def flow() -> None:  # (poison keeps arriving: every batch the re-tag could be in holds some)
        while not flowing.is_set():
            sqs.send_message(QueueUrl=url, MessageBody=POISON[sent[0] % 2])
            sent[0] += 1
            time.sleep(0.25)

    for body in POISON:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sender = threading.Thread(target=flow, daemon=True)
    sender.start()
    try:
        time.sleep(1.0)
        client.put_object_tagging(Bucket=name, Key=key, Tagging={
            "TagSet": [{"Key": "access_roles", "Value": "董事会"}]})  # fmt: skip
        until(lambda: now() == {"公共/年报 2026.md": ("董事会",)}, "the re-tag in force", watcher,
              now)  # fmt: skip
    finally:
        flowing.set()
        sender.join(timeout=30)
    bad = len(POISON) + sent[0]

    def moved() -> int:
        got = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["All"])["Attributes"]
        return int(got["ApproximateNumberOfMessages"])

    until(lambda: moved() == bad, "moved to the dead-letter queue", watcher, moved)
    until(lambda: any(w.get("rejected") == bad for w in shown_watchers(alias, kb)),
          "named in the status record", watcher, lambda: shown_watchers(alias, kb))  # fmt: skip
    assert watcher.stop() == 0, watcher.said()[-3000:]
    said = watcher.said()
    assert "Traceback" not in said and "events stopped" not in said, said[-3000:]
    assert said.count("an event message could not be read") == bad, said[-3000:]


def post(port: int, body: bytes, token: str | None) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, method="POST")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def minio_body(bucket: str, key: str) -> bytes:
    """A delivery as MinIO's webhook target posts it (one record; the key URL-encoded)."""
    from urllib.parse import quote

    record = {"eventVersion": "2.0", "eventSource": "minio:s3", "awsRegion": "",
              "eventTime": "2026-12-04T09:00:00.000Z", "eventName": "s3:ObjectCreated:Put",
              "userIdentity": {"principalId": "minioadmin"},
              "s3": {"s3SchemaVersion": "1.0", "configurationId": "Config",
                     "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                     "object": {"key": quote(key), "size": 12, "contentType": "text/markdown",
                                "userMetadata": {"content-type": "text/markdown"}}}}  # fmt: skip
    log = {"EventName": "s3:ObjectCreated:Put", "Key": f"{bucket}/{key}", "Records": [record]}
    return json.dumps(log).encode()


def test_pushed_events_are_taken_with_the_token_in_real_servers_formats(
    bucket: tuple[Any, str],
    s3_server: str,
    alias: str,
    es_sync: Elasticsearch,
    watchers: list[Watching],  # noqa: F811
    tmp_path: Path,
) -> None:
    client, name = bucket
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    (tmp_path / "token").write_text("s3cr3t-token-for-the-test\n", encoding="utf-8")
    kb = "watch-pushed"
    argv = [f"s3://{name}/docs", "--knowledge-id", kb, "--acl-rules", str(tmp_path / "rules.yaml"),
            "--health-port", "0", "--workers", "1", "--listen", "127.0.0.1:0",
            "--listen-token-file", str(tmp_path / "token"), "--rescan", "600", *STEADY]  # fmt: skip
    watcher = Watching(argv, env(alias, s3=s3_server), tmp_path / "watch.log")
    watchers.append(watcher)
    now = lambda: stored(es_sync, alias, kb)  # noqa: E731
    until(lambda: "listening for pushed events on" in watcher.said(), "listening", watcher)
    port = int(re.findall(r"listening for pushed events on [^\s]+:(\d+)", watcher.said())[0])
    until(lambda: "re-listing:" in watcher.said(), "the first re-listing", watcher)
    client.put_object(Bucket=name, Key="docs/法务/合同 2026.md", Body="# 合同\n\n条款。".encode())
    body = minio_body(name, "docs/法务/合同 2026.md")
    assert post(port, body, None) == 401
    assert post(port, body, "wrong") == 401
    time.sleep(1.0)  # (nothing may come of a refused delivery; the next one is the real one)
    assert now() == {}
    assert post(port, b'{"Records":[{"s3":"x"}]}', "s3cr3t-token-for-the-test") == 400
    assert post(port, body, "s3cr3t-token-for-the-test") == 200
    until(lambda: now() == {"法务/合同 2026.md": ("法务",)}, "MinIO's delivery", watcher, now)
    client.put_object(Bucket=name, Key="docs/公共/通知.md", Body="# 通知\n\n停电。".encode())
    oss = {"events": [{"eventName": "ObjectCreated:PutObject", "eventSource": "acs:oss",
                       "eventTime": "2026-12-04T09:00:00.000Z", "eventVersion": "1.0",
                       "oss": {"bucket": {"name": name}, "object": {"key": "docs/公共/通知.md"},
                               "ossSchemaVersion": "1.0"}, "region": "cn-hangzhou"}]}  # fmt: skip
    mns = base64.b64encode(json.dumps(oss).encode())
    xml = b"<Notification><MessageId>1</MessageId><Message>" + mns + b"</Message></Notification>"
    assert post(port, xml, "s3cr3t-token-for-the-test") == 200
    until(lambda: "公共/通知.md" in now(), "OSS's through MNS", watcher, now)
    assert watcher.stop() == 0, watcher.said()[-3000:]
    assert "s3cr3t" not in watcher.said()


def test_mns_signed_pushes_are_taken_only_when_they_verify(
    bucket: tuple[Any, str],
    s3_server: str,
    alias: str,
    es_sync: Elasticsearch,
    watchers: list[Watching],  # noqa: F811
    tmp_path: Path,
) -> None:
    client, name = bucket
    key, other = new_key(), new_key()
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    kb = "watch-mns"
    with cert_server(tmp_path, {"/x509_public_certificate.pem": certificate(key, "mns")}) as certs:
        environ = {**env(alias, s3=s3_server), "RSVC_WATCH_MNS_CA_FILE": str(certs.ca_file),
                   "RSVC_WATCH_MNS_CERT_HOSTS": f"127.0.0.1:{certs.port}"}  # fmt: skip
        argv = [f"s3://{name}/docs", "--knowledge-id", kb, "--acl-rules",
                str(tmp_path / "rules.yaml"), "--health-port", "0", "--workers", "1",
                "--listen", "127.0.0.1:0", "--listen-mns", "--rescan", "600", *STEADY]  # fmt: skip
        watcher = Watching(argv, environ, tmp_path / "watch.log")  # (no token: MNS alone)
        watchers.append(watcher)
        now = lambda: stored(es_sync, alias, kb)  # noqa: E731
        until(lambda: "listening for pushed events on" in watcher.said(), "listening", watcher)
        port = int(re.findall(r"listening for pushed events on [^\s]+:(\d+)", watcher.said())[0])
        until(lambda: "re-listing:" in watcher.said(), "the first re-listing", watcher)
        client.put_object(
            Bucket=name, Key="docs/法务/合同 2026.md", Body="# 合同\n\n条款。".encode()
        )
        body = notification(name, "docs/法务/合同 2026.md")
        url = certs.url("/x509_public_certificate.pem")
        refused = [
            (notification(name, "docs/公共/x.md"), signed(body, key, url)),  # (tampered body)
            (body, signed(body, other, url)),  # (another key)
            (body, signed(body, key, certs.url("/x509_public_certificate.pem", "localhost"))),
            (body, signed(body, key, certs.url("/x509_public_certificate.pem", scheme="http"))),
            (body, signed(body, key, url, when=time.time() - 20 * 60)),  # (stale)
            (body, {"Authorization": "Bearer anything"}),  # (no token configured)
        ]
        assert [post_signed(port, b, h) for b, h in refused] == [403] * 5 + [401]
        time.sleep(1.0)  # (nothing may come of a refused delivery; the next one is the real one)
        assert now() == {}
        assert post_signed(port, body, signed(body, key, url)) == 200
        until(lambda: now() == {"法务/合同 2026.md": ("法务",)}, "MNS's delivery", watcher, now)
        until(lambda: any(w.get("rejected") == 5 for w in shown_watchers(alias, kb)),
              "named in the status record", watcher, lambda: shown_watchers(alias, kb))  # fmt: skip
        assert certs.asked == ["/x509_public_certificate.pem"]  # (once; nothing off the list)
        assert watcher.stop() == 0, watcher.said()[-3000:]
    said = watcher.said()
    assert "Traceback" not in said, said[-3000:]
    assert said.count("an event message could not be read") == 5, said[-3000:]
