"""The freshness benchmark's bucket servers: moto alone (S3 and SQS in one process, S3 sending
its own notifications), SeaweedFS for S3 beside moto's SQS, or MinIO sending its own
notifications through its webhook target to the watcher's listener (``watch --listen``).

moto lists a bucket in quadratic time (it walks every key for each page of 1,000: 10,000 keys
in 2.9 s, 40,000 in 18 s, 100,000 in minutes), and while it lists, its one process also holds
up the queue and the object reads the watcher waits on — it measures moto, not the watcher.
SeaweedFS (Apache-2.0, ``scripts/seaweedfs.sh``) lists in linear time (40,000 keys in 4.4 s)
but sends no S3-format notifications to SQS (its filer's own are in its own format): beside it
the benchmark delivers the record S3 would send, to moto's queue, as soon as each of its
requests is answered — so the events windows leave out a provider's own delivery delay, as
moto's do.

MinIO (``scripts/minio.sh``) is a real server's delivery end to end: its webhook target, with
a queue directory (events kept while the watcher is down, as a deployment would run it),
POSTs each event to the watcher's listener with the token as ``Authorization: Bearer``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote_plus

from tests.support.fake_provider import free_port

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
KEYS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
EVENTS = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectTagging:*"]
STARTING_S = 180.0


@dataclass
class Buckets:
    """The clients a run writes and changes its bucket with, and the environment its indexer
    and watcher run in (each service at its own endpoint: ``AWS_ENDPOINT_URL_S3``/``_SQS``)."""

    server: str
    s3: Any
    sqs: Any
    env: dict[str, str] = field(default_factory=dict)
    pushed_to: str = ""  # MinIO's: the address its webhook posts to (the watcher's --listen)

    def events(self, bucket: str) -> list[str]:
        """The watcher's options that hear ``bucket``'s events."""
        if self.pushed_to:
            return ["--listen", self.pushed_to]
        return ["--events", f"sqs://{bucket}"]

    def listen(self, bucket: str) -> Notifier | None:
        """A queue named as ``bucket`` given its notifications: moto sends them itself; beside
        SeaweedFS the returned notifier sends what S3 would; MinIO posts them to the
        watcher."""
        if self.pushed_to:
            self.s3.put_bucket_notification_configuration(
                Bucket=bucket,
                NotificationConfiguration={"QueueConfigurations": [{
                    "QueueArn": "arn:minio:sqs::WATCH:webhook",
                    "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],  # (tags: Created)
                }]},
            )  # fmt: skip
            return None
        url = self.sqs.create_queue(QueueName=bucket)["QueueUrl"]
        if self.server != "moto":
            return Notifier(self.sqs, url, bucket)
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        self.s3.put_bucket_notification_configuration(
            Bucket=bucket,
            NotificationConfiguration={
                "QueueConfigurations": [
                    {"QueueArn": arn["Attributes"]["QueueArn"], "Events": EVENTS}
                ]
            },
        )
        return None


class Notifier:
    """Sends a queue the message S3 sends when an object is created or removed (S3 event
    notification format 2.1: its key URL-encoded, spaces as ``+``)."""

    def __init__(self, sqs: Any, url: str, bucket: str) -> None:
        self.sqs, self.url, self.bucket = sqs, url, bucket
        self._sequence = 0

    def __call__(self, event: str, key: str) -> None:
        self._sequence += 1
        now = datetime.now(UTC)
        record = {
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": REGION,
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            "eventName": event,
            "s3": {
                "s3SchemaVersion": "1.0",
                "bucket": {"name": self.bucket, "arn": f"arn:aws:s3:::{self.bucket}"},
                "object": {"key": quote_plus(key, safe="/"), "sequencer": f"{self._sequence:016X}"},
            },
        }
        self.sqs.send_message(QueueUrl=self.url, MessageBody=json.dumps({"Records": [record]}))


def _client(service: Literal["s3", "sqs"], endpoint: str, keys: dict[str, str] = KEYS) -> Any:
    import boto3

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
    )


def _started(process: subprocess.Popen[bytes], client: Any, what: str, log: Path) -> None:
    """Wait until the server answers (its start, or its exit, said with its log)."""
    deadline = time.monotonic() + STARTING_S
    while True:
        try:
            client.list_buckets()
            return
        except Exception:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start: see {log}") from None
            time.sleep(1.0)


def _stopped(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


MINIO_KEYS = {"AWS_ACCESS_KEY_ID": "benchbench", "AWS_SECRET_ACCESS_KEY": "benchbench"}


@contextlib.contextmanager
def _minio(work: Path, pushed_to: str, token: str) -> Iterator[str]:
    """``minio server`` on loopback with a webhook target ``WATCH`` posting to ``pushed_to``
    (a queue directory keeps events while nothing listens), stopped on leaving; its endpoint."""
    found = subprocess.run([str(ROOT / "scripts" / "minio.sh"), "path"], check=True,
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    data = work / "minio"
    (data / "events").mkdir(parents=True)
    port = free_port()
    environ = {
        **os.environ,
        "MINIO_ROOT_USER": MINIO_KEYS["AWS_ACCESS_KEY_ID"],
        "MINIO_ROOT_PASSWORD": MINIO_KEYS["AWS_SECRET_ACCESS_KEY"],
        "MINIO_BROWSER": "off",
        "MINIO_NOTIFY_WEBHOOK_ENABLE_WATCH": "on",
        "MINIO_NOTIFY_WEBHOOK_ENDPOINT_WATCH": f"http://{pushed_to}/",
        "MINIO_NOTIFY_WEBHOOK_AUTH_TOKEN_WATCH": token,
        "MINIO_NOTIFY_WEBHOOK_QUEUE_DIR_WATCH": str(data / "events"),
    }
    argv = [found.stdout.strip(), "server", str(data / "drive"), "--quiet", "--address",
            f"127.0.0.1:{port}", "--console-address", f"127.0.0.1:{free_port()}"]  # fmt: skip
    with (data / "server.log").open("ab") as log:
        process = subprocess.Popen(argv, env=environ, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _started(process, _client("s3", endpoint, MINIO_KEYS), "MinIO", data / "server.log")
        yield endpoint
    finally:
        _stopped(process)


@contextlib.contextmanager
def _seaweedfs(work: Path) -> Iterator[str]:
    """``weed server`` (master, volume, filer and S3 in one process) on loopback, stopped on
    leaving; its S3 endpoint."""
    # (its build, the first time, says so on stderr: minutes)
    found = subprocess.run([str(ROOT / "scripts" / "seaweedfs.sh"), "path"], check=True,
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    data = work / "seaweedfs"
    data.mkdir()
    ports = {
        f"-{role}.{kind}": free_port()
        for role in ("s3", "master", "volume", "filer")
        for kind in ("port", "port.grpc")
    }
    argv = [found.stdout.strip(), f"-logdir={data}", "server", f"-dir={data}", "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1", "-s3", *(f"{flag}={n}" for flag, n in ports.items())]  # fmt: skip
    with (data / "server.log").open("ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{ports['-s3.port']}"
    try:
        _started(process, _client("s3", endpoint), "SeaweedFS", data / "server.log")
        yield endpoint
    finally:
        _stopped(process)


@contextlib.contextmanager
def bucket_servers(server: str, work: Path) -> Iterator[Buckets]:
    """moto (S3 and SQS), SeaweedFS (S3) beside moto (SQS), or MinIO (S3, posting its events
    to the watcher), stopped on leaving."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    try:
        with contextlib.ExitStack() as stack:
            queue = f"http://127.0.0.1:{port}"
            if server == "minio":
                pushed_to, token = f"127.0.0.1:{free_port()}", secrets.token_urlsafe(24)
                s3 = stack.enter_context(_minio(work, pushed_to, token))
                env = {"AWS_ENDPOINT_URL_S3": s3, "AWS_REGION": REGION,
                       "RSVC_WATCH_LISTEN_TOKEN": token, **MINIO_KEYS}  # fmt: skip
                yield Buckets(server, _client("s3", s3, MINIO_KEYS), None, env, pushed_to)
                return
            s3 = queue if server == "moto" else stack.enter_context(_seaweedfs(work))
            env = {"AWS_ENDPOINT_URL_S3": s3, "AWS_ENDPOINT_URL_SQS": queue,
                   "AWS_REGION": REGION, **KEYS}  # fmt: skip
            yield Buckets(server, _client("s3", s3), _client("sqs", queue), env)
    finally:
        moto.stop()
