"""The plain (non-RDMA) path of hipobj-gateway with real S3 clients.

Starts `hipobj-gateway --listen 127.0.0.1:<free port>` and talks to it with
boto3, the minio client and the aws CLI. Every request goes through the
gateway's SigV4 verification (header auth, presigned URLs, aws-chunked
bodies) and is proxied to the store. Every test runs in two upstream modes:

- `embedded`: the gateway's embedded store, hipobj-store (a temporary directory);
- `external`: the gateway in front of a separately started S3 server (as
  `.ci/run` starts s3s-fs), named by `HIPOBJ_TEST_S3_ENDPOINT`,
  `HIPOBJ_TEST_S3_ACCESS_KEY` and `HIPOBJ_TEST_S3_SECRET_KEY`. Without
  them these tests are skipped, unless `REQUIRE_S3S_FS=1`, which makes that
  a failure.

The binary is `$HIPOBJ_GATEWAY_BIN`, by default `target/debug/hipobj-gateway`
relative to the workspace root. Run with:

    cargo build -p hipobj-gateway
    python3 -m pip install -r tests/python/requirements.txt
    python3 -m pytest -q tests/python
"""

import base64
import hashlib
import hmac
import io
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zlib

import boto3
import pytest
import store_probe
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACCESS_KEY = "hipobj-test-key"
SECRET_KEY = "hipobj-test-secret"
REGION = "us-east-1"
MIB = 1 << 20


def _gateway_bin():
    path = os.environ.get("HIPOBJ_GATEWAY_BIN", "target/debug/hipobj-gateway")
    if not os.path.isabs(path):
        path = os.path.join(ROOT, path)
    return path


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _external_store():
    """(endpoint, access key, secret key) of the external store, or None."""
    endpoint = os.environ.get("HIPOBJ_TEST_S3_ENDPOINT")
    if not endpoint:
        return None
    try:
        return endpoint, os.environ["HIPOBJ_TEST_S3_ACCESS_KEY"], os.environ["HIPOBJ_TEST_S3_SECRET_KEY"]
    except KeyError as e:
        pytest.fail(f"{e.args[0]} must be set with HIPOBJ_TEST_S3_ENDPOINT")


@pytest.fixture(scope="session", params=["embedded", "external"])
def upstream(request):
    """The upstream mode: None for the embedded store, else the external
    store's (endpoint, access key, secret key)."""
    if request.param == "embedded":
        return None
    store = _external_store()
    if store is None:
        why = "external upstream: HIPOBJ_TEST_S3_ENDPOINT is not set"
        if os.environ.get("REQUIRE_S3S_FS") == "1":
            pytest.fail(why + ", and REQUIRE_S3S_FS=1")
        pytest.skip(why)
    return store


@pytest.fixture(scope="session")
def direct(upstream):
    """A boto3 client straight to the external store (None when embedded)."""
    if upstream is None:
        return None
    endpoint, access, secret = upstream
    return _client(endpoint, secret=secret, access=access)


@pytest.fixture(scope="session")
def endpoint(tmp_path_factory, upstream):
    """The gateway's URL; the process lives for the whole session (of its
    upstream mode). In front of a store that refuses trailing checksums
    (Ceph RGW 16: `store_probe`), with `--upstream-no-checksum-trailers`."""
    extra = [] if upstream is None else store_probe.gateway_args(store_probe.probe(*upstream))
    yield from _gateway(tmp_path_factory, upstream, extra)


def _gateway(tmp_path_factory, upstream, extra):
    """Starts a gateway in front of `upstream` with `extra` arguments,
    yields its URL, and stops it."""
    binary = _gateway_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(
            f"{binary} not found: run `cargo build -p hipobj-gateway` or set HIPOBJ_GATEWAY_BIN"
        )
    log_path = tmp_path_factory.mktemp("gateway") / "gateway.log"
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "warn")
    # The defaults the tests sign with, whatever the caller's environment.
    for var in list(env):
        if var in ("HIPOBJ_ACCESS_KEY", "HIPOBJ_SECRET_KEY", "HIPOBJ_REGION", "HIPOBJ_DATA_DIR") or var.startswith(
            "HIPOBJ_UPSTREAM"
        ):
            env.pop(var)
    args = []
    if upstream is not None:
        store, access, secret = upstream
        # s3s-fs echoes encoding-type=url without encoding the keys.
        args = ["--upstream", store, "--upstream-access-key", access, "--upstream-drop-encoding-type"]
        env["HIPOBJ_UPSTREAM_SECRET_KEY"] = secret
    args += extra
    for attempt in range(3):
        port = _free_port()
        log = open(log_path, "ab")
        proc = subprocess.Popen(
            [binary, "--listen", f"127.0.0.1:{port}", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        ready = True
                        break
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        if ready:
            break
        proc.kill()
        proc.wait()
        log.close()
    else:
        pytest.fail(f"hipobj-gateway did not start; log:\n{log_path.read_text(errors='replace')}")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def _client(endpoint, secret=SECRET_KEY, access=ACCESS_KEY, **config):
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        region_name=REGION,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
            **config,
        ),
    )


class Sent:
    """Records the headers of every request a boto3 client sends."""

    def __init__(self, client):
        self.requests = []
        client.meta.events.register("before-send.s3.*", self._record)

    def _record(self, request, **_):
        headers = {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        self.requests.append((request.method, request.url, headers))

    def last(self, method="PUT"):
        return [r for r in self.requests if r[0] == method][-1][2]


def _force_trailer_checksums(client):
    """Makes PutObject and UploadPart send their checksum in an aws-chunked
    trailer (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`), as botocore >= 1.36 does
    by default over https; over plain http it sends the checksum as a header
    instead, so without this the trailer path would not be exercised here."""

    def force(params, **_):
        algorithm = params["context"].get("checksum", {}).get("request_algorithm")
        if isinstance(algorithm, dict):
            algorithm["in"] = "trailer"

    client.meta.events.register("before-call.s3.PutObject", force)
    client.meta.events.register("before-call.s3.UploadPart", force)


@pytest.fixture(scope="session")
def s3(endpoint):
    return _client(endpoint)


@pytest.fixture
def bucket(s3):
    name = f"plain-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    yield name
    # Empty and remove it, whatever the test left.
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
        for obj in page.get("Contents", []):
            s3.delete_object(Bucket=name, Key=obj["Key"])
    # Abort what is left in progress (s3s-fs, the external store, does not
    # implement ListMultipartUploads).
    try:
        uploads = s3.list_multipart_uploads(Bucket=name).get("Uploads", [])
    except ClientError:
        uploads = []
    for up in uploads:
        s3.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
    s3.delete_bucket(Bucket=name)


def _error(excinfo):
    err = excinfo.value.response
    return err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]


def _crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


# --------------------------------------------------------------------------
# boto3


def test_health(endpoint):
    with urllib.request.urlopen(endpoint + "/health") as r:
        assert r.status == 200
        assert b'"store":true' in r.read()


def test_bucket_create_list_delete(s3):
    name = f"plain-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.head_bucket(Bucket=name)
    assert name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.delete_bucket(Bucket=name)
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert _error(e)[0] == 404


def test_put_get_small(s3, bucket, direct):
    sent = Sent(s3)
    data = b"0123456789abcdefghijklmnopqrstuvwxyz"
    r = s3.put_object(Bucket=bucket, Key="small.txt", Body=data, ContentType="text/plain")
    assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    # Over http botocore signs the payload's SHA-256 and sends its default
    # checksum (CRC32) as a header, which the store checks.
    headers = sent.last("PUT")
    assert headers["x-amz-content-sha256"] == hashlib.sha256(data).hexdigest()
    assert headers.get("x-amz-checksum-crc32") == _crc32_b64(data)
    # The store's answer passes through: the checksum is echoed where the
    # store echoes it to the same PUT straight (S3, s3s-fs and the embedded
    # store do; Ceph RGW 16 does not).
    if direct is None:
        assert r.get("ChecksumCRC32") == _crc32_b64(data)
    else:
        straight = direct.put_object(Bucket=bucket, Key="small-direct.txt", Body=data, ContentType="text/plain")
        assert straight["ETag"] == r["ETag"]
        assert r.get("ChecksumCRC32") == straight.get("ChecksumCRC32")
        assert r.get("ChecksumCRC32") in (None, _crc32_b64(data))

    got = s3.get_object(Bucket=bucket, Key="small.txt")
    assert got["Body"].read() == data
    assert got["ContentLength"] == len(data)
    assert got["ContentType"] == "text/plain"


def test_put_get_12mib_single_put(s3, bucket):
    data = os.urandom(12 * MIB)
    r = s3.put_object(Bucket=bucket, Key="dir/big.bin", Body=data)
    assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    got = s3.get_object(Bucket=bucket, Key="dir/big.bin")
    assert got["ContentLength"] == len(data)
    assert got["Body"].read() == data


@pytest.mark.parametrize("algorithm", [None, "CRC32", "SHA1", "SHA256"])
def test_put_trailer_checksum(endpoint, bucket, algorithm):
    """aws-chunked with a trailing checksum, STREAMING-UNSIGNED-PAYLOAD-TRAILER."""
    client = _client(endpoint)
    _force_trailer_checksums(client)
    sent = Sent(client)
    data = os.urandom(3 * MIB + 17)
    extra = {} if algorithm is None else {"ChecksumAlgorithm": algorithm}
    r = client.put_object(Bucket=bucket, Key="trailer.bin", Body=data, **extra)
    assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    headers = sent.last("PUT")
    assert headers["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert headers["content-encoding"] == "aws-chunked"
    assert headers["x-amz-trailer"] == "x-amz-checksum-%s" % (algorithm or "crc32").lower()
    assert headers["x-amz-decoded-content-length"] == str(len(data))
    assert client.get_object(Bucket=bucket, Key="trailer.bin")["Body"].read() == data


@pytest.fixture(scope="session")
def endpoint_plain_bodies(tmp_path_factory, upstream):
    """A gateway in front of the external store that sends trailing
    checksums' bodies plain (`--upstream-no-checksum-trailers`)."""
    if upstream is None:
        pytest.skip("a setting of the external upstream")
    yield from _gateway(tmp_path_factory, upstream, ["--upstream-no-checksum-trailers"])


def test_trailer_checksums_as_plain_bodies(endpoint_plain_bodies, tmp_path):
    """For a store that refuses STREAMING-UNSIGNED-PAYLOAD-TRAILER (Ceph RGW
    16): the client's trailer checksum is checked by the gateway, and the
    store gets the bytes as a plain body. PutObject and a multipart upload's
    parts arrive whole."""
    client = _client(endpoint_plain_bodies)
    _force_trailer_checksums(client)
    sent = Sent(client)
    name = f"plain-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    data = os.urandom(3 * MIB + 17)
    r = client.put_object(Bucket=name, Key="trailer.bin", Body=data, ChecksumAlgorithm="CRC32")
    assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    assert sent.last("PUT")["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert client.get_object(Bucket=name, Key="trailer.bin")["Body"].read() == data
    src = tmp_path / "src.bin"
    big = os.urandom(20 * MIB)
    src.write_bytes(big)
    cfg = TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB, max_concurrency=4)
    client.upload_file(str(src), name, "multi.bin", Config=cfg)
    assert client.get_object(Bucket=name, Key="multi.bin")["Body"].read() == big
    for key in ("trailer.bin", "multi.bin"):
        client.delete_object(Bucket=name, Key=key)
    client.delete_bucket(Bucket=name)


@pytest.mark.parametrize("trailer", [False, True], ids=["header-checksum", "trailer-checksum"])
def test_upload_file_multipart(endpoint, bucket, tmp_path, trailer):
    """boto3's transfer manager: 20 MiB over an 8 MiB threshold is a
    multipart upload (CreateMultipartUpload, 3 UploadPart, Complete)."""
    client = _client(endpoint)
    if trailer:
        _force_trailer_checksums(client)
    sent = Sent(client)
    src = tmp_path / "src.bin"
    data = os.urandom(20 * MIB)
    src.write_bytes(data)
    cfg = TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB, max_concurrency=4)
    client.upload_file(str(src), bucket, "multi/part.bin", Config=cfg)

    parts = [h for (m, url, h) in sent.requests if m == "PUT" and "partNumber=" in url]
    assert len(parts) == 3
    if trailer:
        assert all(h["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER" for h in parts)
    head = client.head_object(Bucket=bucket, Key="multi/part.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-3")

    dst = tmp_path / "dst.bin"
    client.download_file(bucket, "multi/part.bin", str(dst), Config=cfg)
    assert dst.read_bytes() == data


def test_get_range(s3, bucket):
    data = bytes(range(256)) * 4
    s3.put_object(Bucket=bucket, Key="range.bin", Body=data)
    r = s3.get_object(Bucket=bucket, Key="range.bin", Range="bytes=10-19")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert r["ContentRange"] == f"bytes 10-19/{len(data)}"
    assert r["ContentLength"] == 10
    assert r["Body"].read() == data[10:20]
    r = s3.get_object(Bucket=bucket, Key="range.bin", Range="bytes=-5")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert r["Body"].read() == data[-5:]


def test_head_object(s3, bucket):
    data = b"head me"
    s3.put_object(Bucket=bucket, Key="h", Body=data, Metadata={"color": "blue"})
    h = s3.head_object(Bucket=bucket, Key="h")
    assert h["ContentLength"] == len(data)
    assert h["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    assert h["Metadata"] == {"color": "blue"}
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="missing")
    assert _error(e)[0] == 404
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="missing")
    assert _error(e) == (404, "NoSuchKey")


def test_list_objects_v2(s3, bucket):
    keys = ["a.txt", "dir/one.txt", "dir/two.txt", "dir/sub/three.txt", "other/x", "sp ace+plus.txt", "pct%41.txt"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())

    r = s3.list_objects_v2(Bucket=bucket)
    assert sorted(o["Key"] for o in r["Contents"]) == sorted(keys)
    assert r["KeyCount"] == len(keys)

    r = s3.list_objects_v2(Bucket=bucket, Prefix="dir/")
    assert sorted(o["Key"] for o in r["Contents"]) == ["dir/one.txt", "dir/sub/three.txt", "dir/two.txt"]

    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert sorted(o["Key"] for o in r["Contents"]) == ["a.txt", "pct%41.txt", "sp ace+plus.txt"]
    assert sorted(p["Prefix"] for p in r["CommonPrefixes"]) == ["dir/", "other/"]

    r = s3.list_objects_v2(Bucket=bucket, Prefix="dir/", Delimiter="/")
    assert sorted(o["Key"] for o in r["Contents"]) == ["dir/one.txt", "dir/two.txt"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["dir/sub/"]

    # Pagination with a continuation token.
    seen = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 2}):
        seen += [o["Key"] for o in page.get("Contents", [])]
    assert sorted(seen) == sorted(keys)

    # Keys with a space, a plus and a percent sign come back as they went in
    # (the embedded store URL-encodes listed keys when asked; in front of
    # s3s-fs the gateway drops encoding-type=url, see
    # --upstream-drop-encoding-type).
    assert s3.get_object(Bucket=bucket, Key="sp ace+plus.txt")["Body"].read() == b"sp ace+plus.txt"


def test_copy_object(s3, bucket, direct):
    data = b"copy me " * 100
    s3.put_object(Bucket=bucket, Key="src", Body=data)
    try:
        r = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    except ClientError as e:
        if e.response["Error"]["Code"] == "NotImplemented":
            pytest.skip("the embedded store does not implement CopyObject")
        raise
    etag = r["CopyObjectResult"]["ETag"]
    assert etag.strip('"') == hashlib.md5(data).hexdigest()
    if direct is None:
        assert etag == '"%s"' % hashlib.md5(data).hexdigest()
    else:
        # The CopyObjectResult passes through as the store wrote it: S3 and
        # s3s-fs quote the ETag, Ceph RGW 16 does not. The same copy
        # straight to the store gives the same form.
        straight = direct.copy_object(Bucket=bucket, Key="dst-direct", CopySource={"Bucket": bucket, "Key": "src"})
        assert etag == straight["CopyObjectResult"]["ETag"]
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == data


def test_delete_object_and_bucket(s3):
    name = f"plain-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"x")
    r = s3.delete_object(Bucket=name, Key="k")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=name, Key="k")
    assert _error(e)[0] == 404
    s3.delete_bucket(Bucket=name)
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=name)
    assert _error(e) == (404, "NoSuchBucket")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert _error(e) == (404, "NoSuchBucket")


def test_delete_non_empty_bucket(s3):
    """S3 and the embedded store refuse with 409 BucketNotEmpty; s3s-fs
    (the external store) removes the bucket and its objects. Either is
    passed through as is."""
    name = f"plain-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"x")
    try:
        s3.delete_bucket(Bucket=name)
    except ClientError as e:
        err = e.response
        assert (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]) == (409, "BucketNotEmpty")
        s3.delete_object(Bucket=name, Key="k")
        s3.delete_bucket(Bucket=name)
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_presigned_urls(endpoint, s3, bucket):
    data = os.urandom(4096)
    s3.put_object(Bucket=bucket, Key="pre/signed key.bin", Body=data)
    v4 = _client(endpoint, signature_version="s3v4")
    url = v4.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "pre/signed key.bin"}, ExpiresIn=300
    )
    assert "X-Amz-Signature=" in url
    with urllib.request.urlopen(url) as r:
        assert r.status == 200
        assert r.read() == data

    # A presigned PUT, then read back.
    put_url = v4.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "pre/put.bin"}, ExpiresIn=300
    )
    req = urllib.request.Request(put_url, data=b"presigned put", method="PUT")
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
    assert s3.get_object(Bucket=bucket, Key="pre/put.bin")["Body"].read() == b"presigned put"

    # A tampered signature is refused.
    bad = url[:-1] + ("0" if url[-1] != "0" else "1")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad)
    assert e.value.code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in e.value.read()

    # boto3's default presigned URL for S3 in us-east-1 may be SigV2
    # (AWSAccessKeyId/Signature/Expires), which the gateway verifies too.
    v2_url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "pre/signed key.bin"}, ExpiresIn=300
    )
    with urllib.request.urlopen(v2_url) as r:
        assert r.status == 200
        assert r.read() == data


def test_bad_credentials(endpoint, bucket):
    bad = _client(endpoint, secret="not-the-secret")
    with pytest.raises(ClientError) as e:
        bad.list_objects_v2(Bucket=bucket)
    assert _error(e) == (403, "SignatureDoesNotMatch")
    with pytest.raises(ClientError) as e:
        bad.put_object(Bucket=bucket, Key="nope", Body=b"x")
    assert _error(e) == (403, "SignatureDoesNotMatch")

    unknown = _client(endpoint, access="unknown-key")
    with pytest.raises(ClientError) as e:
        unknown.get_object(Bucket=bucket, Key="nope")
    assert _error(e) == (403, "InvalidAccessKeyId")


def _signed_headers(endpoint, path, body, headers, payload_hash):
    """The headers of a PUT of `body` signed by botocore's S3 signer with
    `payload_hash` as the x-amz-content-sha256."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class FixedPayload(S3SigV4Auth):
        def payload(self, request):
            return payload_hash

    req = AWSRequest(method="PUT", url=endpoint + path, data=body, headers=headers)
    FixedPayload(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(req)
    return dict(req.headers.items())


def _send_put(endpoint, path, body, headers):
    """A PUT sent as is with http.client: (status, body)."""
    import http.client

    host, port = endpoint.split("://", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("PUT", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _raw_put(endpoint, path, body, headers, payload_hash):
    """A PUT signed by botocore's S3 signer with `payload_hash` as the
    x-amz-content-sha256, sent as is with http.client: (status, body)."""
    return _send_put(endpoint, path, body, _signed_headers(endpoint, path, body, headers, payload_hash))


def _aws_chunked_unsigned(data, trailer_name, trailer_value, chunk=64 * 1024):
    out = bytearray()
    for i in range(0, len(data), chunk):
        piece = data[i : i + chunk]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    out += b"0\r\n%s:%s\r\n\r\n" % (trailer_name.encode(), trailer_value.encode())
    return bytes(out)


def _stored(s3, bucket, key):
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 404
        return False


def test_payload_sha256_mismatch_is_not_stored(endpoint, s3, bucket):
    data = b"the body" * 100
    status, body = _raw_put(endpoint, f"/{bucket}/sha", data, {}, hashlib.sha256(b"another body").hexdigest())
    assert status >= 400, body
    assert not _stored(s3, bucket, "sha")
    # The right hash is taken.
    status, body = _raw_put(endpoint, f"/{bucket}/sha", data, {}, hashlib.sha256(data).hexdigest())
    assert status == 200, body
    assert s3.get_object(Bucket=bucket, Key="sha")["Body"].read() == data


def test_payload_sha256_mismatch_error_code(endpoint, bucket):
    data = b"the body" * 100
    status, body = _raw_put(endpoint, f"/{bucket}/sha", data, {}, hashlib.sha256(b"another body").hexdigest())
    assert status == 400 and b"<Code>XAmzContentSHA256Mismatch</Code>" in body, (status, body)


def test_unsigned_trailer_raw(endpoint, s3, bucket):
    """A hand-made STREAMING-UNSIGNED-PAYLOAD-TRAILER body with a correct CRC32."""
    data = os.urandom(200 * 1024 + 5)
    encoded = _aws_chunked_unsigned(data, "x-amz-checksum-crc32", _crc32_b64(data))
    headers = {
        "Content-Encoding": "aws-chunked",
        "X-Amz-Trailer": "x-amz-checksum-crc32",
        "X-Amz-Decoded-Content-Length": str(len(data)),
        "Content-Length": str(len(encoded)),
    }
    status, body = _raw_put(endpoint, f"/{bucket}/raw-trailer", encoded, headers, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert status == 200, body
    assert s3.get_object(Bucket=bucket, Key="raw-trailer")["Body"].read() == data


def test_unsigned_trailer_wrong_checksum_is_refused(endpoint, s3, bucket):
    data = os.urandom(200 * 1024 + 5)
    encoded = _aws_chunked_unsigned(data, "x-amz-checksum-crc32", "AAAAAA==")
    headers = {
        "Content-Encoding": "aws-chunked",
        "X-Amz-Trailer": "x-amz-checksum-crc32",
        "X-Amz-Decoded-Content-Length": str(len(data)),
        "Content-Length": str(len(encoded)),
    }
    status, body = _raw_put(endpoint, f"/{bucket}/bad-crc", encoded, headers, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert status == 400, (status, body)
    assert b"<Code>BadDigest</Code>" in body, body
    assert not _stored(s3, bucket, "bad-crc")


def _aws_chunked_signed(pieces, trailer_name, trailer_value, seed, amz_date):
    """STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: `pieces` as chunks signed
    in a chain from the request's signature `seed`, then a signed trailer."""
    day = amz_date[:8]
    scope = f"{day}/{REGION}/s3/aws4_request"
    key = ("AWS4" + SECRET_KEY).encode()
    for part in (day, REGION, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()

    def sign(*lines):
        return hmac.new(key, "\n".join(lines).encode(), hashlib.sha256).hexdigest()

    empty = hashlib.sha256(b"").hexdigest()
    out = bytearray()
    prev = seed
    for piece in list(pieces) + [b""]:
        prev = sign("AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, empty, hashlib.sha256(piece).hexdigest())
        out += b"%x;chunk-signature=%s\r\n" % (len(piece), prev.encode())
        if piece:
            out += piece + b"\r\n"
    canonical = f"{trailer_name}:{trailer_value}\n".encode()
    trailer_sig = sign("AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev, hashlib.sha256(canonical).hexdigest())
    out += f"{trailer_name}:{trailer_value}\r\nx-amz-trailer-signature:{trailer_sig}\r\n\r\n".encode()
    return bytes(out)


def _signed_trailer_put(endpoint, path, data, checksum, tamper=lambda body: body):
    """A STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER PUT of `data` in 64 KiB
    chunks with the trailer x-amz-checksum-crc32: `checksum`; `tamper` may
    change the encoded body (keeping its length, or the signed
    Content-Length follows it): (status, body)."""
    pieces = [data[i : i + 64 * 1024] for i in range(0, len(data), 64 * 1024)]
    headers = {
        "Content-Encoding": "aws-chunked",
        "X-Amz-Trailer": "x-amz-checksum-crc32",
        "X-Amz-Decoded-Content-Length": str(len(data)),
    }
    # Signatures are all 64 hex digits: a body signed with a dummy seed has
    # the length of the real one.
    length = len(tamper(_aws_chunked_signed(pieces, "x-amz-checksum-crc32", checksum, "0" * 64, "20000101T000000Z")))
    headers["Content-Length"] = str(length)
    signed = _signed_headers(endpoint, path, b"", headers, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")
    signed["Content-Length"] = str(length)
    seed = signed["Authorization"].rsplit("Signature=", 1)[1]
    body = tamper(_aws_chunked_signed(pieces, "x-amz-checksum-crc32", checksum, seed, signed["X-Amz-Date"]))
    assert len(body) == length
    return _send_put(endpoint, path, body, signed)


def test_signed_trailer_checksum(endpoint, s3, bucket):
    """STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER end to end: the right
    checksum is taken; a wrong one (properly signed), a corrupted chunk and
    a truncated body are refused with S3's codes, and nothing is stored."""
    data = os.urandom(3 * 64 * 1024 + 5)
    good = _crc32_b64(data)
    status, body = _signed_trailer_put(endpoint, f"/{bucket}/signed", data, good)
    assert status == 200, body
    assert s3.get_object(Bucket=bucket, Key="signed")["Body"].read() == data

    status, body = _signed_trailer_put(endpoint, f"/{bucket}/bad-digest", data, _crc32_b64(data + b"!"))
    assert (status, b"<Code>BadDigest</Code>" in body) == (400, True), (status, body)
    assert not _stored(s3, bucket, "bad-digest")

    def corrupt(encoded):
        i = encoded.index(b"\r\n") + 100
        return encoded[:i] + bytes([encoded[i] ^ 1]) + encoded[i + 1 :]

    status, body = _signed_trailer_put(endpoint, f"/{bucket}/bad-chunk", data, good, corrupt)
    assert (status, b"<Code>SignatureDoesNotMatch</Code>" in body) == (403, True), (status, body)
    assert not _stored(s3, bucket, "bad-chunk")

    def truncate(encoded):
        return encoded[: encoded.rindex(b"0;chunk-signature=")]

    status, body = _signed_trailer_put(endpoint, f"/{bucket}/short", data, good, truncate)
    assert (status, b"<Code>IncompleteBody</Code>" in body) == (400, True), (status, body)
    assert not _stored(s3, bucket, "short")


# --------------------------------------------------------------------------
# minio


def test_minio(endpoint, s3, upstream, direct):
    from minio import Minio
    from minio.error import S3Error

    host = endpoint.split("://", 1)[1]
    m = Minio(host, access_key=ACCESS_KEY, secret_key=SECRET_KEY, secure=False, region=REGION)
    trace = io.StringIO()
    m.trace_on(trace)
    name = f"minio-{uuid.uuid4().hex[:12]}"
    m.make_bucket(name)
    assert m.bucket_exists(name)

    small = b"hello from minio"
    m.put_object(name, "d/small.txt", io.BytesIO(small), len(small))
    big = os.urandom(6 * MIB + 3)
    # Unknown length: a multipart upload of 5 MiB parts.
    r = m.put_object(name, "d/big.bin", io.BytesIO(big), -1, part_size=5 * MIB)
    # The client takes the ETag from CompleteMultipartUpload's answer, which
    # passes through as the store wrote it: Ceph RGW 16 writes an empty
    # <ETag></ETag> (a known bug; HEAD has it). Straight to the store, the
    # same upload gives the same.
    if direct is None:
        assert r.etag.endswith("-2")
    else:
        store_url, store_access, store_secret = upstream
        straight = Minio(
            store_url.split("://", 1)[1], access_key=store_access, secret_key=store_secret, secure=False, region=REGION
        )
        rs = straight.put_object(name, "d/big-direct.bin", io.BytesIO(big), -1, part_size=5 * MIB)
        assert r.etag == rs.etag
        straight.remove_object(name, "d/big-direct.bin")
    assert m.stat_object(name, "d/big.bin").etag.endswith("-2")
    m.put_object(name, "top.txt", io.BytesIO(b"top"), 3)

    resp = m.get_object(name, "d/small.txt")
    try:
        assert resp.read() == small
    finally:
        resp.close()
        resp.release_conn()
    resp = m.get_object(name, "d/big.bin")
    try:
        assert resp.read() == big
    finally:
        resp.close()
        resp.release_conn()
    resp = m.get_object(name, "d/big.bin", offset=10, length=10)
    try:
        assert resp.read() == big[10:20]
    finally:
        resp.close()
        resp.release_conn()
    assert m.stat_object(name, "d/big.bin").size == len(big)

    # Non-recursive: delimiter=/.
    listed = sorted((o.object_name, o.is_dir) for o in m.list_objects(name))
    assert listed == [("d/", True), ("top.txt", False)]
    # Recursive: minio sends an empty `delimiter=`, which must list everything.
    trace.truncate(0)
    listed = sorted(o.object_name for o in m.list_objects(name, recursive=True))
    assert listed == ["d/big.bin", "d/small.txt", "top.txt"]
    assert "delimiter=&" in trace.getvalue() or "delimiter=\n" in trace.getvalue() or "delimiter= " in trace.getvalue()
    listed = sorted(o.object_name for o in m.list_objects(name, prefix="d/", recursive=True))
    assert listed == ["d/big.bin", "d/small.txt"]
    m.trace_off()

    # What minio wrote, boto3 reads; in front of an external store, the
    # objects are in that store.
    assert s3.get_object(Bucket=name, Key="d/small.txt")["Body"].read() == small
    if direct is not None:
        stored = sorted(o["Key"] for o in direct.list_objects_v2(Bucket=name)["Contents"])
        assert stored == ["d/big.bin", "d/small.txt", "top.txt"]
        assert direct.get_object(Bucket=name, Key="d/big.bin")["Body"].read() == big

    for obj in ["d/small.txt", "d/big.bin", "top.txt"]:
        m.remove_object(name, obj)
    m.remove_bucket(name)
    assert not m.bucket_exists(name)

    bad = Minio(host, access_key=ACCESS_KEY, secret_key="wrong", secure=False, region=REGION)
    with pytest.raises(S3Error) as e:
        bad.list_buckets()
    assert e.value.code == "SignatureDoesNotMatch"


# --------------------------------------------------------------------------
# aws CLI (awscli v1, run from this interpreter)


@pytest.fixture
def aws(endpoint, tmp_path):
    try:
        import awscli  # noqa: F401
    except ImportError:
        pytest.skip("awscli is not installed")
    config = tmp_path / "aws-config"
    config.write_text("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
    env = dict(os.environ)
    for var in list(env):
        if var.startswith("AWS_"):
            del env[var]
    env.update(
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_CONFIG_FILE=str(config),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_PAGER="",
    )

    def run(*args, check=True):
        r = subprocess.run(
            [sys.executable, "-m", "awscli", "--endpoint-url", endpoint, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"aws {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    return run


def test_aws_cli(aws, s3, tmp_path):
    name = f"cli-{uuid.uuid4().hex[:12]}"
    aws("s3", "mb", f"s3://{name}")
    small = tmp_path / "small.txt"
    small.write_bytes(b"0123456789abcdefghijklmnopqrstuvwxyz")
    big = tmp_path / "big.bin"
    big_data = os.urandom(9 * MIB)  # over the CLI's 8 MiB multipart threshold
    big.write_bytes(big_data)

    aws("s3", "cp", str(small), f"s3://{name}/docs/small.txt")
    aws("s3", "cp", str(big), f"s3://{name}/big.bin")
    assert s3.head_object(Bucket=name, Key="big.bin")["ETag"].strip('"').endswith("-2")

    out = aws("s3", "ls", f"s3://{name}/").stdout
    assert "PRE docs/" in out
    assert "big.bin" in out and str(len(big_data)) in out
    out = aws("s3", "ls", "--recursive", f"s3://{name}").stdout
    assert "docs/small.txt" in out and "big.bin" in out
    assert name in aws("s3", "ls").stdout

    ranged = tmp_path / "ranged.bin"
    r = aws("s3api", "get-object", "--bucket", name, "--key", "docs/small.txt", "--range", "bytes=10-19", str(ranged))
    assert '"ContentRange": "bytes 10-19/36"' in r.stdout
    assert ranged.read_bytes() == b"abcdefghij"

    back = tmp_path / "back.bin"
    aws("s3", "cp", f"s3://{name}/big.bin", str(back))
    assert back.read_bytes() == big_data

    aws("s3", "rm", "--recursive", f"s3://{name}")
    aws("s3", "rb", f"s3://{name}")
    assert name not in aws("s3", "ls").stdout

    # A wrong secret fails with the gateway's S3 error.
    r = subprocess.run(
        [sys.executable, "-m", "awscli", "--endpoint-url", s3.meta.endpoint_url, "s3", "ls"],
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        | {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": "wrong",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    assert "SignatureDoesNotMatch" in r.stderr
