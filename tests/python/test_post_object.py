"""Browser-based uploads (POST Object) through hipobj-gateway, with forms
made by boto3's `generate_presigned_post` (SigV4 forms) and by hand (the
SigV2 form), in both upstream modes (see test_plain_clients.py).

Where the external store is configured, the same form (signed for the
store's keys) is also posted straight to the store, and the two answers'
status and S3 error code are compared: a differential test. The gateway
verifies a form's signature and policy itself and refuses a bad form before
the store sees it, answering as S3 documents. Where a store answers
differently from S3, the difference is listed per store in
`KNOWN_DIFFERENCES` (the store named by `store_probe`) and asserted as
such; docs/ceph-rgw.md says why the gateway follows S3 there.
"""

import base64
import hashlib
import hmac
import http.client
import json
import os
import re
import time
import urllib.parse
import uuid

import pytest
import store_probe

from test_plain_clients import (  # noqa: F401  (fixtures)
    ACCESS_KEY,
    MIB,
    SECRET_KEY,
    _client,
    direct,
    endpoint,
    s3,
    upstream,
)

# store -> case -> (the store's status, code) where it differs from S3's
# (the gateway's). A store not named here must answer as S3 does.
KNOWN_DIFFERENCES = {
    # s3s-fs answers a failed starts-with condition with its own
    # InvalidPolicyDocument, where S3 says 403 AccessDenied "Invalid
    # according to Policy: Policy Condition failed"; and an unknown access
    # key with NotSignedUp (its SimpleAuth's code), where S3 says
    # InvalidAccessKeyId.
    "s3s-fs": {
        "starts-with mismatch": (400, "InvalidPolicyDocument"),
        "unknown key": (403, "NotSignedUp"),
    },
    # Ceph RGW 16 answers every form whose signature it cannot verify (a
    # wrong SigV4 or SigV2 signature, an unknown access key) with 403
    # AccessDenied and no message, where S3 says SignatureDoesNotMatch and
    # InvalidAccessKeyId (docs/ceph-rgw.md).
    "ceph-rgw": {
        "bad signature": (403, "AccessDenied"),
        "unknown key": (403, "AccessDenied"),
        "SigV2 form, bad signature": (403, "AccessDenied"),
    },
}


def _post(url, fields, filename="upload.bin", data=b"", after=()):
    """POSTs a multipart form (the file last, then `after` fields) to `url`;
    (status, headers, body). Redirects are not followed."""
    boundary = "----hipobj" + uuid.uuid4().hex
    parts = []
    for k, v in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        )
    parts.append(
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
    )
    parts.append(data)
    parts.append(b"\r\n")
    for k, v in after:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        )
    parts.append(f"--{boundary}--\r\n".encode())
    body = b"".join(parts)
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    try:
        conn.request(
            "POST",
            u.path or "/",
            body=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None


def _v4(base, access=ACCESS_KEY, secret=SECRET_KEY):
    """A boto3 client of `base` whose forms are SigV4 forms."""
    return _client(base, secret=secret, access=access, signature_version="s3v4")


def _form(client, bucket, key, fields=None, conditions=None, expires=300):
    p = client.generate_presigned_post(
        bucket, key, Fields=fields, Conditions=conditions, ExpiresIn=expires
    )
    return p["url"], p["fields"]


def _v2_form(url_base, bucket, key, secret, access, conditions=()):
    policy = {
        "expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 300)),
        "conditions": [{"bucket": bucket}, ["starts-with", "$key", ""], *conditions],
    }
    policy_b64 = base64.b64encode(json.dumps(policy).encode()).decode()
    signature = base64.b64encode(
        hmac.new(secret.encode(), policy_b64.encode(), hashlib.sha1).digest()
    ).decode()
    fields = {"key": key, "AWSAccessKeyId": access, "policy": policy_b64, "signature": signature}
    return f"{url_base}/{bucket}", fields


@pytest.fixture
def bucket(s3):
    name = f"post-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    yield name
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
        for obj in page.get("Contents", []):
            s3.delete_object(Bucket=name, Key=obj["Key"])
    s3.delete_bucket(Bucket=name)


def _get(s3, bucket, key):
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def _absent(s3, bucket, key):
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", [])
    assert [o["Key"] for o in listed if o["Key"] == key] == []


def test_success_204_with_headers(endpoint, s3, bucket):
    url, fields = _form(
        _v4(endpoint),
        bucket,
        "plain.txt",
        fields={"Content-Type": "text/plain", "x-amz-meta-colour": "blue"},
        conditions=[{"Content-Type": "text/plain"}, {"x-amz-meta-colour": "blue"}],
    )
    status, headers, body = _post(url, fields, data=b"hello form")
    assert status == 204, body
    assert headers["etag"] == '"%s"' % hashlib.md5(b"hello form").hexdigest()
    assert headers["location"].endswith(f"/{bucket}/plain.txt")
    assert _get(s3, bucket, "plain.txt") == b"hello form"
    head = s3.head_object(Bucket=bucket, Key="plain.txt")
    assert head["ContentType"] == "text/plain"
    assert head["Metadata"] == {"colour": "blue"}


@pytest.mark.parametrize("status_field", ["200", "201"])
def test_success_action_status(endpoint, s3, bucket, status_field):
    key = f"status-{status_field}"
    url, fields = _form(
        _v4(endpoint),
        bucket,
        key,
        fields={"success_action_status": status_field},
        conditions=[{"success_action_status": status_field}],
    )
    status, _, body = _post(url, fields, data=b"x" * 100)
    assert status == int(status_field), body
    if status_field == "201":
        assert f"<Key>{key}</Key>".encode() in body
        assert f"<Bucket>{bucket}</Bucket>".encode() in body
        etag = hashlib.md5(b"x" * 100).hexdigest()
        assert f'<ETag>"{etag}"</ETag>'.encode() in body
    else:
        assert body == b""
    assert _get(s3, bucket, key) == b"x" * 100


def test_success_action_redirect(endpoint, s3, bucket):
    target = "http://example.com/uploaded"
    url, fields = _form(
        _v4(endpoint),
        bucket,
        "redirected",
        fields={"success_action_redirect": target},
        conditions=[{"success_action_redirect": target}],
    )
    status, headers, body = _post(url, fields, data=b"redirect me")
    assert status == 303, body
    loc = urllib.parse.urlsplit(headers["location"])
    assert f"{loc.scheme}://{loc.netloc}{loc.path}" == target
    q = urllib.parse.parse_qs(loc.query)
    assert q["bucket"] == [bucket]
    assert q["key"] == ["redirected"]
    assert q["etag"] == ['"%s"' % hashlib.md5(b"redirect me").hexdigest()]


def test_filename_substitution(endpoint, s3, bucket):
    url, fields = _form(_v4(endpoint), bucket, "uploads/${filename}")
    status, _, body = _post(url, fields, filename="photo.jpg", data=b"jpeg")
    assert status == 204, body
    assert _get(s3, bucket, "uploads/photo.jpg") == b"jpeg"


def test_sigv2_form(endpoint, s3, bucket):
    url, fields = _v2_form(endpoint, bucket, "v2/form.bin", SECRET_KEY, ACCESS_KEY)
    status, _, body = _post(url, fields, data=b"sigv2 form")
    assert status == 204, body
    assert _get(s3, bucket, "v2/form.bin") == b"sigv2 form"


def test_large_file_streams(endpoint, s3, bucket):
    data = os.urandom(64 * MIB)
    url, fields = _form(_v4(endpoint), bucket, "large.bin")
    status, _, body = _post(url, fields, data=data)
    assert status == 204, body
    got = _get(s3, bucket, "large.bin")
    assert len(got) == len(data)
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


# Refusals: (name, form builder, data, status, code). Each builder takes
# (url_base, bucket, key, access, secret) and gives (url, fields).
def _too_large(base, b, k, access, secret):
    return _form(_v4(base, access, secret), b, k, conditions=[["content-length-range", 1, 10]])


def _too_small(base, b, k, access, secret):
    return _form(_v4(base, access, secret), b, k, conditions=[["content-length-range", 100, 1000]])


def _expired(base, b, k, access, secret):
    return _form(_v4(base, access, secret), b, k, expires=-60)


def _starts_with(base, b, k, access, secret):
    return _form(_v4(base, access, secret), b, k, conditions=[["starts-with", "$key", "user/"]])


def _extra_field(base, b, k, access, secret):
    url, fields = _form(_v4(base, access, secret), b, k)
    fields["x-amz-meta-sneaky"] = "1"
    return url, fields


def _bad_signature(base, b, k, access, secret):
    url, fields = _form(_v4(base, access, secret), b, k)
    sig = fields["x-amz-signature"]
    fields["x-amz-signature"] = ("0" if sig[0] != "0" else "1") + sig[1:]
    return url, fields


def _unknown_key(base, b, k, access, secret):
    return _form(_v4(base, "NO-SUCH-KEY", "whatever"), b, k)


def _v2_bad_signature(base, b, k, access, secret):
    return _v2_form(base, b, k, "not-the-secret", access)


REFUSALS = [
    ("content-length-range too large", _too_large, b"x" * 11, 400, "EntityTooLarge"),
    ("content-length-range too small", _too_small, b"x" * 10, 400, "EntityTooSmall"),
    ("expired policy", _expired, b"x", 403, "AccessDenied"),
    ("starts-with mismatch", _starts_with, b"x", 403, "AccessDenied"),
    ("extra field", _extra_field, b"x", 403, "AccessDenied"),
    ("bad signature", _bad_signature, b"x", 403, "SignatureDoesNotMatch"),
    ("unknown key", _unknown_key, b"x", 403, "InvalidAccessKeyId"),
    ("SigV2 form, bad signature", _v2_bad_signature, b"x", 403, "SignatureDoesNotMatch"),
]


# The start of S3's message for each refusal (the codes' messages in S3's
# error table, and the "Invalid according to Policy" messages S3 gives a
# form its policy refuses), which the gateway gives too: it refuses these
# forms itself, before the store sees them.
S3_MESSAGES = {
    "content-length-range too large": "Your proposed upload exceeds the maximum allowed size",
    "content-length-range too small": "Your proposed upload is smaller than the minimum allowed size",
    "expired policy": "Invalid according to Policy: Policy expired.",
    "starts-with mismatch": "Invalid according to Policy: Policy Condition failed:",
    "extra field": "Invalid according to Policy: Extra input fields: x-amz-meta-sneaky",
    "bad signature": "The request signature we calculated does not match the signature you provided.",
    "unknown key": "The AWS Access Key Id you provided does not exist in our records.",
    "SigV2 form, bad signature": "The request signature we calculated does not match the signature you provided.",
}


def _message(body):
    m = re.search(rb"<Message>([^<]*)</Message>", body)
    return m.group(1).decode() if m else ""


@pytest.mark.parametrize("name,build,data,status,code", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused(endpoint, s3, bucket, upstream, direct, name, build, data, status, code):
    key = "refused/" + name.replace(" ", "-")
    url, fields = build(endpoint, bucket, key, ACCESS_KEY, SECRET_KEY)
    got_status, _, body = _post(url, fields, data=data)
    assert (got_status, _code(body)) == (status, code), body
    assert _message(body).startswith(S3_MESSAGES[name]), body
    _absent(s3, bucket, key)

    if direct is None:
        return
    # Differential: the same form, signed for the store, straight to it.
    store_url, store_access, store_secret = upstream
    differences = KNOWN_DIFFERENCES.get(store_probe.probe(*upstream).name, {})
    store_bucket = f"diff-{uuid.uuid4().hex[:12]}"
    direct.create_bucket(Bucket=store_bucket)
    try:
        url, fields = build(store_url, store_bucket, key, store_access, store_secret)
        s_status, _, s_body = _post(url, fields, data=data)
        expected = differences.get(name, (status, code))
        assert (s_status, _code(s_body)) == expected, s_body
    finally:
        for obj in direct.list_objects_v2(Bucket=store_bucket).get("Contents", []):
            direct.delete_object(Bucket=store_bucket, Key=obj["Key"])
        direct.delete_bucket(Bucket=store_bucket)


def test_differential_success(endpoint, s3, bucket, upstream, direct):
    """A good form: 201 from both, with the same ETag."""
    if direct is None:
        pytest.skip("no external store")
    store_bucket = f"diff-{uuid.uuid4().hex[:12]}"
    direct.create_bucket(Bucket=store_bucket)
    try:
        answers = []
        store_url, store_access, store_secret = upstream
        clients = ((_v4(endpoint), bucket), (_v4(store_url, store_access, store_secret), store_bucket))
        for client, b in clients:
            url, fields = _form(
                client,
                b,
                "same.bin",
                fields={"success_action_status": "201"},
                conditions=[{"success_action_status": "201"}],
            )
            status, _, body = _post(url, fields, data=b"same bytes")
            answers.append((status, re.search(rb"<ETag>([^<]*)</ETag>", body).group(1)))
        # S3 (and the gateway) quote the ETag in the PostResponse; s3s-fs
        # does not.
        assert answers[0][1] == b'"%s"' % hashlib.md5(b"same bytes").hexdigest().encode()
        assert [(st, e.strip(b'"')) for st, e in answers[:1]] == [(st, e.strip(b'"')) for st, e in answers[1:]]
    finally:
        for obj in direct.list_objects_v2(Bucket=store_bucket).get("Contents", []):
            direct.delete_object(Bucket=store_bucket, Key=obj["Key"])
        direct.delete_bucket(Bucket=store_bucket)
