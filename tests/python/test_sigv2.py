"""Signature Version 2 through hipobj-gateway: boto3 with
`signature_version='s3'` (botocore's HmacV1 signer, as old SDKs and backup
tools sign) in both upstream modes (see test_plain_clients.py): header
auth for PUT, GET, HEAD, DELETE, listings and a multipart upload, query
auth (presigned URLs), and the refusals (wrong secret, unknown key,
expired URL) with S3's status and code.
"""

import os
import urllib.error
import urllib.request
import uuid

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from test_plain_clients import (  # noqa: F401  (fixtures)
    MIB,
    SECRET_KEY,
    _client,
    _error,
    direct,
    endpoint,
    s3,
    upstream,
)


def _v2(endpoint, **kw):
    return _client(endpoint, signature_version="s3", **kw)


@pytest.fixture
def v2(endpoint):
    client = _v2(endpoint)
    # The signer is HmacV1: `Authorization: AWS <key>:<signature>`.
    seen = []
    client.meta.events.register(
        "before-send.s3.*", lambda request, **_: seen.append(request.headers.get("Authorization"))
    )
    client.seen = seen
    return client


@pytest.fixture
def bucket(v2):
    name = f"sigv2-{uuid.uuid4().hex[:12]}"
    v2.create_bucket(Bucket=name)
    yield name
    for page in v2.get_paginator("list_objects").paginate(Bucket=name):
        for obj in page.get("Contents", []):
            v2.delete_object(Bucket=name, Key=obj["Key"])
    v2.delete_bucket(Bucket=name)


def test_object_round_trip(v2, s3, bucket):
    data = os.urandom(10_000)
    v2.put_object(
        Bucket=bucket,
        Key="dir/a b+c.bin",
        Body=data,
        ContentType="application/x-test",
        Metadata={"tool": "backup"},
    )
    auth = v2.seen[-1]
    auth = auth.decode() if isinstance(auth, bytes) else auth
    assert auth.startswith("AWS "), auth
    got = v2.get_object(Bucket=bucket, Key="dir/a b+c.bin")
    assert got["Body"].read() == data
    head = v2.head_object(Bucket=bucket, Key="dir/a b+c.bin")
    assert head["ContentType"] == "application/x-test"
    assert head["Metadata"] == {"tool": "backup"}
    # The SigV4 client sees the same object.
    assert s3.get_object(Bucket=bucket, Key="dir/a b+c.bin")["Body"].read() == data
    listed = v2.list_objects(Bucket=bucket, Prefix="dir/")["Contents"]
    assert [o["Key"] for o in listed] == ["dir/a b+c.bin"]
    v2.delete_object(Bucket=bucket, Key="dir/a b+c.bin")
    with pytest.raises(ClientError) as e:
        v2.head_object(Bucket=bucket, Key="dir/a b+c.bin")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_multipart_upload(v2, bucket, tmp_path):
    """upload_file in parts: ?uploads, ?partNumber&uploadId, ?uploadId are
    sub-resources, signed."""
    data = os.urandom(11 * MIB)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=2)
    v2.upload_file(str(path), bucket, "big.bin", Config=cfg)
    assert v2.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == data


def test_presigned_urls(v2, bucket):
    v2.put_object(Bucket=bucket, Key="pre.bin", Body=b"presigned v2")
    url = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "pre.bin"}, ExpiresIn=300)
    assert "AWSAccessKeyId=" in url and "Signature=" in url, url
    with urllib.request.urlopen(url) as r:
        assert r.read() == b"presigned v2"
    put = v2.generate_presigned_url(
        "put_object",
        Params={"Bucket": bucket, "Key": "put.bin", "ContentType": "application/octet-stream"},
        ExpiresIn=300,
    )
    # Content-Type is signed in SigV2 (urllib would add its own otherwise).
    req = urllib.request.Request(
        put, data=b"put by v2 url", method="PUT", headers={"Content-Type": "application/octet-stream"}
    )
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
    assert v2.get_object(Bucket=bucket, Key="put.bin")["Body"].read() == b"put by v2 url"

    # Expired (Expires in the past).
    old = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "pre.bin"}, ExpiresIn=-60)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(old)
    body = e.value.read()
    assert e.value.code == 403
    assert b"<Code>AccessDenied</Code>" in body
    assert b"Request has expired" in body

    # Wrong signature.
    bad = _v2(v2.meta.endpoint_url, secret="not-the-secret").generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "pre.bin"}, ExpiresIn=300
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad)
    assert e.value.code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in e.value.read()


def test_bad_credentials(endpoint, bucket):
    with pytest.raises(ClientError) as e:
        _v2(endpoint, secret="not-the-secret").list_objects(Bucket=bucket)
    assert _error(e) == (403, "SignatureDoesNotMatch")
    with pytest.raises(ClientError) as e:
        _v2(endpoint, access="NO-SUCH-KEY").list_objects(Bucket=bucket)
    assert _error(e) == (403, "InvalidAccessKeyId")


def test_same_answers_as_the_store(endpoint, upstream, direct, bucket, v2):
    """Differential, where the external store is configured: s3s-fs also
    verifies SigV2; a missing key and a wrong secret get the same status
    and code from it and from the gateway. (Its buckets are made with
    SigV4: s3s-fs refuses botocore's SigV2 bucket requests, which sign the
    resource `/bucket/` as S3 accepts it; the gateway accepts it too.)"""
    if upstream is None:
        pytest.skip("no external store")
    store_url, access, secret = upstream
    store = _v2(store_url, access=access, secret=secret)
    store_bucket = f"diff-{uuid.uuid4().hex[:12]}"
    direct.create_bucket(Bucket=store_bucket)
    try:
        for client, b in ((v2, bucket), (store, store_bucket)):
            client.put_object(Bucket=b, Key="same", Body=b"same bytes")
            got = client.get_object(Bucket=b, Key="same")
            assert got["Body"].read() == b"same bytes"
            client.delete_object(Bucket=b, Key="same")
        for client, b in ((v2, bucket), (store, store_bucket)):
            with pytest.raises(ClientError) as e:
                client.get_object(Bucket=b, Key="missing")
            assert _error(e) == (404, "NoSuchKey")
        for base, b, a in ((endpoint, bucket, "hipobj-test-key"), (store_url, store_bucket, access)):
            with pytest.raises(ClientError) as e:
                _v2(base, access=a, secret="wrong").list_objects(Bucket=b)
            assert _error(e) == (403, "SignatureDoesNotMatch")
    finally:
        direct.delete_bucket(Bucket=store_bucket)
