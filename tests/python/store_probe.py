"""What the external store does, found once per session by asking it
straight (with its own keys, no gateway in between).

The tests in front of an external store (s3s-fs, Ceph RGW, any S3 server)
assert the property they are about, and where that depends on the store,
they compare with the store's own answer to the same request. Some answers
decide how the gateway is started, or what a test can expect at all; those
are probed here, once:

- `takes_checksum_trailers`: a PutObject whose CRC32 comes in an
  aws-chunked trailer (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`, what boto3
  sends over https) is taken. Ceph RGW 16 refuses it
  (`XAmzContentSHA256Mismatch` or `MissingContentLength`); in front of such
  a store the tests start the gateway with `--upstream-no-checksum-trailers`
  (the gateway checks the checksum and sends the body plain).
- `echoes_checksums`: a PutObject with `x-amz-checksum-crc32` in a header
  is answered with that header (s3s-fs and S3 do; RGW 16 neither echoes nor
  records it).
- `name`: which store this is, for the few answers that are documented
  per store (`KNOWN_DIFFERENCES` in test_post_object.py): `ceph-rgw`,
  `s3s-fs` or `unknown` (where every answer must be S3's).
  `HIPOBJ_TEST_S3_STORE` overrides it.
"""

import base64
import functools
import os
import urllib.error
import urllib.request
import uuid
import zlib
from dataclasses import dataclass

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-east-1"


@dataclass(frozen=True)
class Store:
    name: str
    takes_checksum_trailers: bool
    echoes_checksums: bool


def client(endpoint, access, secret, **config):
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        region_name=REGION,
        config=Config(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            retries={"max_attempts": 1, "mode": "standard"},
            **config,
        ),
    )


def force_trailer_checksums(c):
    """Makes PutObject and UploadPart send their checksum in an aws-chunked
    trailer, as botocore >= 1.36 does by default over https (over plain
    http it sends it as a header)."""

    def force(params, **_):
        algorithm = params["context"].get("checksum", {}).get("request_algorithm")
        if isinstance(algorithm, dict):
            algorithm["in"] = "trailer"

    c.meta.events.register("before-call.s3.PutObject", force)
    c.meta.events.register("before-call.s3.UploadPart", force)


def _name(endpoint):
    """The store's name, from an anonymous `GET /` (the answer identifies
    the implementation; it is never compared)."""
    named = os.environ.get("HIPOBJ_TEST_S3_STORE")
    if named:
        return named
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=10) as r:
            status, headers, body = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, body = e.code, e.headers, e.read()
    request_id = headers.get("x-amz-request-id") or ""
    # radosgw: request ids "tx<hex>-<hex>-<id>-<zonegroup>", and an
    # anonymous ListBuckets answered as the user "anonymous".
    if request_id.startswith("tx") and b"<ID>anonymous</ID>" in body:
        return "ceph-rgw"
    # s3s (s3s-fs): no request id, and its own message.
    if status == 403 and b"<Message>Signature is required</Message>" in body:
        return "s3s-fs"
    return "unknown"


@functools.lru_cache(maxsize=None)
def probe(endpoint, access, secret):
    """The `Store` at `endpoint` (cached: asked once per session)."""
    straight = client(endpoint, access, secret)
    trailers = client(endpoint, access, secret)
    force_trailer_checksums(trailers)
    bucket = f"probe-{uuid.uuid4().hex[:12]}"
    data = os.urandom(64 * 1024 + 1)
    crc32 = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    straight.create_bucket(Bucket=bucket)
    try:
        r = straight.put_object(Bucket=bucket, Key="header", Body=data, ChecksumAlgorithm="CRC32")
        echoes = r["ResponseMetadata"]["HTTPHeaders"].get("x-amz-checksum-crc32") == crc32
        try:
            trailers.put_object(Bucket=bucket, Key="trailer", Body=data, ChecksumAlgorithm="CRC32")
            took = straight.get_object(Bucket=bucket, Key="trailer")["Body"].read() == data
        except ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] // 100 != 4:
                raise
            took = False
    finally:
        for key in ("header", "trailer"):
            straight.delete_object(Bucket=bucket, Key=key)
        straight.delete_bucket(Bucket=bucket)
    return Store(name=_name(endpoint), takes_checksum_trailers=took, echoes_checksums=echoes)


def gateway_args(store):
    """The gateway's flags that `store` needs."""
    return [] if store.takes_checksum_trailers else ["--upstream-no-checksum-trailers"]
