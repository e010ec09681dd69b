"""The boto3 bridge with real boto3 against the test server: one call, and
get_object/put_object/download_fileobj/upload_fileobj move bodies by RDMA,
falling back to boto3's own path where RDMA is not there."""

import io

import boto3
import numpy as np
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import hipobj.boto3
from conftest import AK, MIB, SK


def s3_client(endpoint):
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=AK,
        aws_secret_access_key=SK,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1, "mode": "standard"}),
    )


def data(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def test_get_and_put_object_by_rdma(server, bucket):
    plain = s3_client(server)
    s3 = s3_client(server)
    bridge = hipobj.boto3.enable(s3)
    assert bridge.client is not None, bridge.why
    body = data(3 * MIB + 1, 1)
    r = s3.put_object(Bucket=bucket, Key="k", Body=body)
    assert bridge.rdma == 1 and bridge.last.path == "rdma"
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    head = plain.head_object(Bucket=bucket, Key="k")
    assert head["ContentLength"] == len(body) and head["ETag"] == r["ETag"]
    assert plain.get_object(Bucket=bucket, Key="k")["Body"].read() == body

    other = data(MIB + 7, 2)
    plain.put_object(Bucket=bucket, Key="from-boto3", Body=other)
    got = s3.get_object(Bucket=bucket, Key="from-boto3")
    assert bridge.rdma == 2 and bridge.last.path == "rdma" and bridge.fallback == 0
    assert got["ContentLength"] == len(other)
    assert got["ETag"] == plain.head_object(Bucket=bucket, Key="from-boto3")["ETag"]
    assert got["Body"].read() == other
    part = s3.get_object(Bucket=bucket, Key="from-boto3", Range="bytes=10-19")
    assert part["Body"].read() == other[10:20]
    assert part["ContentRange"] == f"bytes 10-19/{len(other)}"
    assert s3.get_object(Bucket=bucket, Key="from-boto3", Range="bytes=-5")["Body"].read() == other[-5:]
    assert s3.get_object(Bucket=bucket, Key="from-boto3", Range="bytes=1000-")["Body"].read() == other[1000:]
    # Bodies of other kinds.
    s3.put_object(Bucket=bucket, Key="s", Body="text body")
    s3.put_object(Bucket=bucket, Key="f", Body=io.BytesIO(b"file body"))
    assert plain.get_object(Bucket=bucket, Key="s")["Body"].read() == b"text body"
    assert plain.get_object(Bucket=bucket, Key="f")["Body"].read() == b"file body"
    assert bridge.fallback == 0
    # Errors are boto3's own.
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="missing")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"


def test_file_objects_in_parts(server, bucket, tmp_path):
    s3 = s3_client(server)
    bridge = hipobj.boto3.enable(s3, part_size=5 * MIB)
    body = data(12 * MIB + 3, 3)
    seen = []
    s3.upload_fileobj(io.BytesIO(body), bucket, "big", Callback=seen.append)
    assert sum(seen) == len(body) and len(seen) == 3
    assert bridge.last.path == "rdma"
    plain = s3_client(server)
    assert plain.head_object(Bucket=bucket, Key="big")["ETag"].strip('"').endswith("-3")
    out = io.BytesIO()
    seen.clear()
    s3.download_fileobj(bucket, "big", out, Callback=seen.append)
    assert out.getvalue() == body and sum(seen) == len(body)
    src = tmp_path / "src"
    src.write_bytes(body[: 2 * MIB])
    s3.upload_file(str(src), bucket, "small")
    dst = tmp_path / "dst"
    s3.download_file(bucket, "small", str(dst))
    assert dst.read_bytes() == body[: 2 * MIB]
    assert bridge.fallback == 0 and bridge.rdma == 4


def test_falls_back_to_boto3_where_rdma_is_not_there(proxy_factory, server, bucket):
    plain_endpoint = proxy_factory(strip_rdma=True).url
    s3 = s3_client(plain_endpoint)
    bridge = hipobj.boto3.enable(s3)
    body = data(2 * MIB, 4)
    s3.put_object(Bucket=bucket, Key="k", Body=body)
    assert bridge.fallback == 1 and bridge.rdma == 0
    assert "RDMA" in bridge.reasons[-1]
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body
    out = io.BytesIO()
    s3.download_fileobj(bucket, "k", out)
    assert out.getvalue() == body
    s3.upload_fileobj(io.BytesIO(body), bucket, "k2")
    assert s3_client(server).get_object(Bucket=bucket, Key="k2")["Body"].read() == body
    assert bridge.fallback == 4 and bridge.rdma == 0


def test_arguments_the_bridge_does_not_carry_go_to_boto3(server, bucket):
    s3 = s3_client(server)
    bridge = hipobj.boto3.enable(s3)
    s3.put_object(Bucket=bucket, Key="m", Body=b"meta", Metadata={"a": "b"}, ContentType="text/plain")
    assert bridge.fallback == 1 and "Metadata" in bridge.reasons[-1]
    head = s3_client(server).head_object(Bucket=bucket, Key="m")
    assert head["Metadata"] == {"a": "b"} and head["ContentType"] == "text/plain"
    got = s3.get_object(Bucket=bucket, Key="m")
    assert got["Body"].read() == b"meta" and got["ContentType"] == "text/plain"
    assert bridge.rdma == 1
    hipobj.boto3.disable(s3)
    assert "get_object" not in s3.__dict__
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == b"meta"
    assert bridge.rdma == 1
