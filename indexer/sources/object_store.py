"""S3 and Alibaba Cloud OSS (its S3-compatible API) as a source.

Listing is paginated and streamed (one page in memory at a time); objects are read one by
one, so memory does not grow with the bucket. Sidecar metadata ``<key>.meta.json`` travels
with its object and is never indexed as a document. A page that still fails after the
client's retries ends the listing as a failure (``ListingFailure``, scope ``rest``): the run
fails and prunes nothing, since what the listing did not reach is unknown, not gone.
"""

from __future__ import annotations

import ipaddress
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from indexer.metadata_limits import MAX_SIDECAR_BYTES
from indexer.passing_over import SIDECAR_SUFFIX, PassedOver, by_design, odd_key
from indexer.sources.base import ListingFailure, ObjectRef, parse_sidecar

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True, slots=True)
class ObjectStoreOptions:
    """Endpoint, region and credentials; unset values come from the environment."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    addressing_style: str | None = None


def _is_local(endpoint: str) -> bool:
    host = urlparse(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def s3_client(scheme: str, options: ObjectStoreOptions) -> S3Client:
    """A boto3 client for ``s3`` or ``oss`` with the names each ecosystem's users know.

    OSS: ``OSS_ACCESS_KEY_ID``, ``OSS_ACCESS_KEY_SECRET``, ``OSS_REGION`` (e.g. cn-hangzhou),
    ``OSS_ENDPOINT`` (default ``https://s3.oss-<region>.aliyuncs.com``), virtual-hosted
    addressing and V2 signatures as Alibaba documents for AWS SDKs. S3: the standard AWS
    variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
    ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``) and profiles. Endpoints on loopback or an
    IP use path-style.
    """
    import boto3
    from botocore.config import Config

    env = os.environ
    if scheme == "oss":
        region = options.region or env.get("OSS_REGION")
        endpoint = options.endpoint or env.get("OSS_ENDPOINT")
        if not endpoint:
            if not region:
                raise ValueError("oss:// needs OSS_REGION (e.g. cn-hangzhou) or OSS_ENDPOINT")
            endpoint = f"https://s3.oss-{region}.aliyuncs.com"
        key_id = options.access_key_id or env.get("OSS_ACCESS_KEY_ID")
        secret = options.secret_access_key or env.get("OSS_ACCESS_KEY_SECRET")
        if not key_id or not secret:
            raise ValueError("oss:// needs OSS_ACCESS_KEY_ID and OSS_ACCESS_KEY_SECRET")
        signature = "s3"
    else:
        region = options.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        # (S3's own endpoint first, as every AWS SDK reads it: the queue may be elsewhere)
        endpoint = options.endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
        key_id, secret = options.access_key_id, options.secret_access_key
        signature = "s3v4"
    style = options.addressing_style or (
        "path" if endpoint and _is_local(endpoint) else ("virtual" if scheme == "oss" else "auto")
    )
    config = Config(
        signature_version=signature,
        s3={"addressing_style": style},  # type: ignore[arg-type]
        retries={"max_attempts": 5, "mode": "standard"},
    )
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=config,
    )


class ObjectStoreSource:
    """``s3://bucket/prefix`` or ``oss://bucket/prefix``."""

    def __init__(
        self, url: str, options: ObjectStoreOptions | None = None, *, page_size: int = 1000
    ) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in ("s3", "oss") or not parsed.netloc:
            raise ValueError(f"{url!r} is not s3://bucket/prefix or oss://bucket/prefix")
        self.scheme = parsed.scheme
        self.bucket = parsed.netloc
        # A prefix is a folder: "docs" lists docs/…, never docs2/…; keys below it are kept
        # exactly as the store has them (docs//fin/a.md is not docs/fin/a.md).
        prefix = parsed.path.lstrip("/")
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.description = url
        self.location = f"{self.scheme}://{self.bucket}/{self.prefix}"
        self.page_size = page_size
        self._client = s3_client(self.scheme, options or ObjectStoreOptions())
        self.passed_over = PassedOver()
        self.failures: list[ListingFailure] = []

    def _key(self, full_key: str) -> str:
        return full_key[len(self.prefix) :]

    def list(self) -> Iterator[ObjectRef]:
        """Every indexable object, in the store's (UTF-8 binary) key order, each with its
        sidecar's ETag: an object is held back until the listing has passed the place its
        sidecar would have (``a.md.meta.json`` lists soon after ``a.md``), so the few keys in
        between are all that is ever held."""
        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket, Prefix=self.prefix, PaginationConfig={"PageSize": self.page_size}
        )
        sidecars: dict[str, str] = {}  # full key of a document → its sidecar's ETag
        held: deque[tuple[bytes, ObjectRef]] = deque()  # (where its sidecar would list, ref)
        for page in self._pages(pages):
            for item in page.get("Contents", []):
                full_key = item["Key"]
                here = full_key.encode("utf-8")
                while held and held[0][0] < here:
                    yield self._with_sidecar(held.popleft()[1], sidecars)
                if full_key.endswith(SIDECAR_SUFFIX):
                    etag = str(item.get("ETag", "")).strip('"')
                    sidecars[full_key.removesuffix(SIDECAR_SUFFIX)] = etag
                    continue
                if full_key.endswith("/") or self.passed_over.unwanted(self._key(full_key)):
                    continue
                if by_design(full_key):
                    continue
                if (why := odd_key(self._key(full_key))) is not None:
                    self.passed_over.add(self._key(full_key), why)
                    continue
                if self.passed_over.unsupported(self._key(full_key)):
                    continue
                ref = ObjectRef(
                    key=self._key(full_key),
                    uri=f"{self.scheme}://{self.bucket}/{full_key}",
                    etag=str(item.get("ETag", "")).strip('"'),
                    size=int(item.get("Size", 0)),
                    identity=f"{self.scheme}://{self.bucket}/{full_key}",
                )
                held.append(((full_key + SIDECAR_SUFFIX).encode("utf-8"), ref))
        while held:
            yield self._with_sidecar(held.popleft()[1], sidecars)

    def _pages(self, pages: Any) -> Iterator[dict[str, Any]]:
        """The listing's pages until one fails after the client's retries (then a listing
        failure after the last key of the last page: everything after it is unknown)."""
        from botocore.exceptions import BotoCoreError, ClientError

        iterator = iter(pages)
        last = ""
        while True:
            try:
                page = next(iterator)
            except StopIteration:
                return
            except (BotoCoreError, ClientError) as exc:
                reason = f"cannot be listed: {type(exc).__name__}: {exc}"
                self.failures.append(ListingFailure(last, reason, "rest"))
                return
            if contents := page.get("Contents"):
                last = self._key(contents[-1]["Key"])
            yield page

    def look(self, key: str) -> ObjectRef | None:
        """The object at ``key`` now (one HEAD, and one for its sidecar), as a listing would
        give it; None where a listing would give nothing (gone, passed over)."""
        from botocore.exceptions import ClientError

        full_key = self._full_key(key)
        if (
            not key
            or full_key.endswith("/")
            or by_design(full_key)
            or odd_key(key) is not None
            or self.passed_over.unwanted(key)
            or self.passed_over.unsupported(key)
        ):
            return None

        def head(name: str) -> dict[str, Any] | None:
            try:
                return dict(self._client.head_object(Bucket=self.bucket, Key=name))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise

        found = head(full_key)
        if found is None:
            return None
        sidecar = head(full_key + SIDECAR_SUFFIX)
        return ObjectRef(
            key=key,
            uri=f"{self.scheme}://{self.bucket}/{full_key}",
            etag=str(found.get("ETag", "")).strip('"'),
            size=int(found.get("ContentLength", 0)),
            identity=f"{self.scheme}://{self.bucket}/{full_key}",
            sidecar=str(sidecar.get("ETag", "")).strip('"') if sidecar else "",
        )

    def under(self, folder: str) -> Iterator[ObjectRef]:  # noqa: ARG002
        """Nothing: a bucket has objects, not folders (each object has its own event)."""
        return iter(())

    def _with_sidecar(self, ref: ObjectRef, sidecars: dict[str, str]) -> ObjectRef:
        found = sidecars.pop(self._full_key(ref.key), "")
        return replace(ref, sidecar=found) if found else ref

    def _full_key(self, key: str) -> str:
        return self.prefix + key

    def read(self, ref: ObjectRef) -> bytes:
        response = self._client.get_object(Bucket=self.bucket, Key=self._full_key(ref.key))
        return response["Body"].read()

    def tags(self, ref: ObjectRef) -> dict[str, str]:
        """S3 object tagging (OSS: its S3-compatible tagging API): one request per object.
        An error (the object gone, tagging not allowed) is raised: the caller fails the
        document rather than publish it."""
        response = self._client.get_object_tagging(Bucket=self.bucket, Key=self._full_key(ref.key))
        return {tag["Key"]: tag["Value"] for tag in response.get("TagSet", [])}

    def sidecar(self, ref: ObjectRef) -> dict[str, Any]:
        key = self._full_key(ref.key) + SIDECAR_SUFFIX
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=key)
        except self._client.exceptions.NoSuchKey:
            return {}
        return parse_sidecar(response["Body"].read(MAX_SIDECAR_BYTES + 1), key)
