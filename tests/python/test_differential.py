"""Differential test: the same S3 requests sent straight to an S3 store and
through hipobj-gateway in front of that same store, their answers compared.

The store is the one `.ci/run` starts (s3s-fs 0.14.1), named by
`HIPOBJ_TEST_S3_ENDPOINT`, `HIPOBJ_TEST_S3_ACCESS_KEY` and
`HIPOBJ_TEST_S3_SECRET_KEY`; without them the tests are skipped, unless
`REQUIRE_S3S_FS=1`, which makes that a failure. The gateway
(`$HIPOBJ_GATEWAY_BIN`, by default `target/debug/hipobj-gateway`) is
started here with `--domain localhost` (virtual-hosted requests).

Requests are raw, signed with botocore's SigV4 signers: with the store's
keys for the store, with the gateway's keys for the gateway. Each side works
in a bucket of its own (they share the store). Compared, answer by answer:
the status, the S3 error code, and the headers that matter (ETag,
Content-Range, Content-Length of successful answers, x-amz-checksum-*,
x-amz-meta-*, whether Last-Modified is there), and for XML bodies the
elements that carry the result (keys, prefixes, ETags, parts, ...), with the
bucket name and upload ids made neutral; object bodies by their SHA-256.

Where the gateway answers differently on purpose (it verifies signatures
itself and answers as S3 does), the case is listed in GATEWAY_ANSWERS_AS_S3
and `docs/protocol.md` ("Where the gateway answers differently from the
store") says why; there the gateway's answer is checked against S3's.
"""

import base64
import datetime
import hashlib
import http.client
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zlib

import boto3
import botocore.auth
import pytest
import store_probe
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GATEWAY_KEY = ("hipobj-test-key", "hipobj-test-secret")
REGION = "us-east-1"
MIB = 1 << 20
DOMAIN = "localhost"

# Cases where the gateway answers as S3 does and the store (s3s-fs) does
# not: the gateway verifies presigned URLs itself. Documented in
# docs/protocol.md, "Where the gateway answers differently from the store".
GATEWAY_ANSWERS_AS_S3 = {
    "presigned-expires-negative",
    "presigned-expires-not-a-number",
    "presigned-expires-over-a-week",
    "presigned-date-in-the-future",
}


def _gateway_bin():
    path = os.environ.get("HIPOBJ_GATEWAY_BIN", "target/debug/hipobj-gateway")
    return path if os.path.isabs(path) else os.path.join(ROOT, path)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def store():
    endpoint = os.environ.get("HIPOBJ_TEST_S3_ENDPOINT")
    if not endpoint:
        why = "differential test: HIPOBJ_TEST_S3_ENDPOINT is not set"
        if os.environ.get("REQUIRE_S3S_FS") == "1":
            pytest.fail(why + ", and REQUIRE_S3S_FS=1")
        pytest.skip(why)
    try:
        return endpoint, os.environ["HIPOBJ_TEST_S3_ACCESS_KEY"], os.environ["HIPOBJ_TEST_S3_SECRET_KEY"]
    except KeyError as e:
        pytest.fail(f"{e.args[0]} must be set with HIPOBJ_TEST_S3_ENDPOINT")


@pytest.fixture(scope="module")
def gateway(store, tmp_path_factory):
    """The gateway's URL, in front of `store`, with --domain localhost."""
    binary = _gateway_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} not found: run `cargo build -p hipobj-gateway` or set HIPOBJ_GATEWAY_BIN")
    endpoint, access, secret = store
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIPOBJ_") or k == "HIPOBJ_SOFT_TIMEOUT_SCALE"}
    env.setdefault("RUST_LOG", "warn")
    env["HIPOBJ_UPSTREAM_SECRET_KEY"] = secret
    log_path = tmp_path_factory.mktemp("gateway") / "gateway.log"
    for _ in range(3):
        port = _free_port()
        log = open(log_path, "ab")
        proc = subprocess.Popen(
            [
                binary,
                "--listen",
                f"127.0.0.1:{port}",
                "--rdma-device",
                "soft0",
                "--upstream",
                endpoint,
                "--upstream-access-key",
                access,
                "--upstream-drop-encoding-type",
                "--domain",
                DOMAIN,
                # --upstream-no-checksum-trailers where the store refuses
                # trailing checksums (Ceph RGW 16).
                *store_probe.gateway_args(store_probe.probe(*store)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        else:
            proc.kill()
            proc.wait()
            log.close()
            continue
        break
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


# --------------------------------------------------------------------------
# Raw signed requests and their answers, made comparable.


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lowercase name -> list of raw byte values
        self.body = body

    def header(self, name):
        v = self.headers.get(name)
        return v[0].decode("latin-1") if v else None

    def xml(self, tag):
        return [m.decode() for m in re.findall(rb"<%s>(.*?)</%s>" % (tag.encode(), tag.encode()), self.body, re.S)]

    def code(self):
        if self.status < 300 or not self.body.lstrip().startswith(b"<"):
            return None
        codes = self.xml("Code")
        return codes[0] if codes else None


# The elements of XML result bodies compared (bucket names and upload ids
# made neutral first).
RESULT_TAGS = (
    "Key",
    "Prefix",
    "CommonPrefixes",
    "Delimiter",
    "IsTruncated",
    "KeyCount",
    "MaxKeys",
    "ETag",
    "Size",
    "PartNumber",
    "Code",
)


class Side:
    """One way to the store: its URL, keys, and the bucket it works in."""

    def __init__(self, name, url, access, secret, bucket):
        self.name = name
        self.url = url
        self.access = access
        self.secret = secret
        self.bucket = bucket
        self.upload_ids = []

    def path(self, p):
        return p.replace("{b}", self.bucket)

    def send(self, method, path, query="", headers=None, body=b"", sign=True, host=None):
        """A request signed in the header (botocore's S3SigV4Auth, payload
        hash signed). Header values may be non-ASCII text: signed as UTF-8,
        sent as UTF-8."""
        url = self.url + urllib.parse.quote(self.path(path), safe="/~") + ("?" + self.path(query) if query else "")
        headers = {k: self.path(v) for k, v in (headers or {}).items()}
        if host:
            headers["Host"] = host
        req = AWSRequest(method=method, url=url, data=body, headers=headers)
        if sign:
            S3SigV4Auth(Credentials(self.access, self.secret), "s3", REGION).add_auth(req)
        return self._send(method, url, dict(req.headers.items()), body)

    def presign(self, method, path, expires, when=None):
        """A presigned URL (S3SigV4QueryAuth), signed at `when` (UTC)."""
        url = self.url + urllib.parse.quote(self.path(path), safe="/~")
        req = AWSRequest(method=method, url=url)
        saved = botocore.auth.get_current_datetime
        if when is not None:
            botocore.auth.get_current_datetime = lambda: when
        try:
            S3SigV4QueryAuth(Credentials(self.access, self.secret), "s3", REGION, expires=expires).add_auth(req)
        finally:
            botocore.auth.get_current_datetime = saved
        return req.url

    def get_url(self, url, method="GET"):
        return self._send(method, url, {}, b"")

    @staticmethod
    def _send(method, url, headers, body):
        u = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        target = u.path + ("?" + u.query if u.query else "")
        conn.putrequest(method, target, skip_host="Host" in headers or "host" in headers, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v.encode("utf-8") if isinstance(v, str) else v)
        if body or method in ("PUT", "POST"):
            if not any(k.lower() == "content-length" for k in headers):
                conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body if body else None)
        r = conn.getresponse()
        data = r.read()
        out = {}
        for k, v in r.getheaders():
            # http.client decodes header bytes as latin-1.
            out.setdefault(k.lower(), []).append(v.encode("latin-1"))
        conn.close()
        return Answer(r.status, out, data)

    def summary(self, a, what):
        """What is compared of an answer."""
        neutral = lambda s: s.replace(self.bucket, "BUCKET")  # noqa: E731
        for up in self.upload_ids:
            neutral_up = neutral
            neutral = lambda s, up=up, f=neutral_up: f(s).replace(up, "UPLOAD")  # noqa: E731
        h = {}
        for name in ("etag", "content-range", "x-amz-mp-parts-count"):
            if a.header(name) is not None:
                h[name] = a.header(name)
        if 200 <= a.status < 300 and a.header("content-length") is not None and "body" in what:
            h["content-length"] = a.header("content-length")
        for name, values in a.headers.items():
            if name.startswith("x-amz-checksum-") or name.startswith("x-amz-meta-"):
                h[name] = b",".join(values)
        h["last-modified?"] = a.header("last-modified") is not None and a.status < 300
        s = {"status": a.status, "code": a.code(), "headers": h}
        if a.body.lstrip().startswith(b"<?xml") or a.body.lstrip().startswith(b"<"):
            if a.status < 300:
                s["xml"] = {t: [neutral(v) for v in a.xml(t)] for t in RESULT_TAGS if a.xml(t)}
                if "unordered" in what:
                    # s3s-fs lists parts in its directory's order; RGW
                    # answers a batch delete in the order its deletes end.
                    s["xml"] = {t: sorted(v) for t, v in s["xml"].items()}
        elif a.body and "body" in what:
            s["sha256"] = hashlib.sha256(a.body).hexdigest()
        return s


@pytest.fixture
def sides(store, gateway):
    endpoint, access, secret = store
    tag = uuid.uuid4().hex[:10]
    direct = Side("store", endpoint, access, secret, f"diff-{tag}-s")
    via = Side("gateway", gateway, *GATEWAY_KEY, f"diff-{tag}-g")
    yield direct, via
    for side in (direct, via):
        _remove_bucket(side)


def _remove_bucket(side):
    a = side.send("GET", "/{b}", "list-type=2")
    for key in a.xml("Key"):
        side.send("DELETE", "/{b}/" + key)
    side.send("DELETE", "/{b}")


def _md5_b64(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def _crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


# --------------------------------------------------------------------------
# The cases: each runs on one side and returns its answers, in order, with
# what of each to compare ("body" compares the payload too).

DATA = bytes(range(256)) * 8
HTTP_DATE_PAST = "Mon, 01 Jan 2001 00:00:00 GMT"
HTTP_DATE_FUTURE = "Fri, 01 Jan 2100 00:00:00 GMT"


def case_buckets(s):
    out = [(s.send("PUT", "/{b}"), "")]
    out.append((s.send("HEAD", "/{b}"), ""))
    listing = s.send("GET", "/")
    out.append((Answer(listing.status, {}, b"<r><Key>%s</Key></r>" % str(s.bucket in listing.xml("Name")).encode()), ""))
    out.append((s.send("PUT", "/{b}/k", body=b"x"), ""))
    out.append((s.send("DELETE", "/{b}/k"), ""))
    out.append((s.send("DELETE", "/{b}"), ""))
    out.append((s.send("HEAD", "/{b}"), ""))
    out.append((s.send("GET", "/{b}", "list-type=2"), ""))
    out.append((s.send("DELETE", "/{b}"), ""))
    return out


def case_objects(s):
    s.send("PUT", "/{b}")
    out = [
        (
            s.send(
                "PUT",
                "/{b}/dir/obj.bin",
                headers={"Content-Type": "application/x-test", "x-amz-meta-color": "blue"},
                body=DATA,
            ),
            "",
        )
    ]
    out.append((s.send("GET", "/{b}/dir/obj.bin"), "body"))
    out.append((s.send("HEAD", "/{b}/dir/obj.bin"), "body"))
    out.append((s.send("GET", "/{b}/missing"), ""))
    out.append((s.send("HEAD", "/{b}/missing"), ""))
    out.append((s.send("DELETE", "/{b}/dir/obj.bin"), ""))
    out.append((s.send("GET", "/{b}/dir/obj.bin"), ""))
    out.append((s.send("GET", "/nosuchbucket-%s/k" % uuid.uuid4().hex[:8]), ""))
    return out


def case_ranges(s):
    s.send("PUT", "/{b}")
    s.send("PUT", "/{b}/r", body=DATA)
    out = []
    for r in ["bytes=10-19", "bytes=-5", "bytes=2000-", "bytes=0-0", "bytes=0-999999", "bytes=5000-6000", "bytes=abc", "bytes=20-10"]:
        out.append((s.send("GET", "/{b}/r", headers={"Range": r}), "body"))
    return out


def case_listings(s):
    s.send("PUT", "/{b}")
    keys = ["a.txt", "dir/one.txt", "dir/two.txt", "dir/sub/three.txt", "other/x", "z"]
    for k in keys:
        s.send("PUT", "/{b}/" + k, body=k.encode())
    out = []
    for q in [
        "list-type=2",
        "list-type=2&prefix=dir%2F",
        "list-type=2&delimiter=%2F",
        "list-type=2&prefix=dir%2F&delimiter=%2F",
        "list-type=2&max-keys=2",
        "list-type=2&start-after=dir%2Fsub",
        "",
        "prefix=dir%2F",
        "delimiter=%2F",
        "max-keys=2",
        "marker=dir%2Ftwo.txt",
    ]:
        out.append((s.send("GET", "/{b}", q), ""))
    # Continuation: page by page with the token each answer gives.
    token, pages = None, 0
    while pages < 10:
        q = "list-type=2&max-keys=2" + ("&continuation-token=" + urllib.parse.quote(token, safe="") if token else "")
        a = s.send("GET", "/{b}", q)
        out.append((a, ""))
        pages += 1
        nxt = a.xml("NextContinuationToken")
        if not nxt:
            break
        token = nxt[0]
    return out


def case_copy(s):
    s.send("PUT", "/{b}")
    s.send("PUT", "/{b}/src", headers={"x-amz-meta-a": "1"}, body=DATA)
    out = [(s.send("PUT", "/{b}/dst", headers={"x-amz-copy-source": "/{b}/src"}), "")]
    out.append((s.send("HEAD", "/{b}/dst"), "body"))
    out.append((s.send("PUT", "/{b}/dst2", headers={"x-amz-copy-source": "/{b}/missing"}), ""))
    return out


def case_multipart(s):
    s.send("PUT", "/{b}")
    part1 = os.urandom(5 * MIB) if not hasattr(case_multipart, "p1") else case_multipart.p1
    case_multipart.p1 = part1
    part2 = b"tail" * 100
    out = []
    created = s.send("POST", "/{b}/mp", "uploads")
    up = created.xml("UploadId")[0]
    s.upload_ids.append(up)
    out.append((created, ""))
    q = urllib.parse.quote(up, safe="")
    p1 = s.send("PUT", "/{b}/mp", f"partNumber=1&uploadId={q}", body=part1)
    p2 = s.send("PUT", "/{b}/mp", f"partNumber=2&uploadId={q}", body=part2)
    out += [(p1, ""), (p2, "")]
    out.append((s.send("GET", "/{b}/mp", f"uploadId={q}"), "unordered"))
    complete = (
        "<CompleteMultipartUpload>"
        + "".join(f"<Part><PartNumber>{n}</PartNumber><ETag>{a.header('etag')}</ETag></Part>" for n, a in ((1, p1), (2, p2)))
        + "</CompleteMultipartUpload>"
    ).encode()
    out.append((s.send("POST", "/{b}/mp", f"uploadId={q}", body=complete), ""))
    out.append((s.send("HEAD", "/{b}/mp"), "body"))
    out.append((s.send("GET", "/{b}/mp", headers={"Range": "bytes=5242870-5242889"}), "body"))
    # Another, aborted.
    created = s.send("POST", "/{b}/ab", "uploads")
    up = created.xml("UploadId")[0]
    s.upload_ids.append(up)
    q = urllib.parse.quote(up, safe="")
    out.append((s.send("PUT", "/{b}/ab", f"partNumber=1&uploadId={q}", body=b"x"), ""))
    out.append((s.send("DELETE", "/{b}/ab", f"uploadId={q}"), ""))
    out.append((s.send("GET", "/{b}/ab", f"uploadId={q}"), ""))
    out.append((s.send("PUT", "/{b}/ab", f"partNumber=2&uploadId={q}", body=b"x"), ""))
    return out


def case_batch_delete(s):
    s.send("PUT", "/{b}")
    for k in ["d1", "d2", "keep"]:
        s.send("PUT", "/{b}/" + k, body=b"x")
    body = b"<Delete><Object><Key>d1</Key></Object><Object><Key>d2</Key></Object><Object><Key>absent</Key></Object></Delete>"
    # S3 does not order a DeleteResult's entries, and RGW deletes the keys
    # concurrently: compared as sets.
    out = [(s.send("POST", "/{b}", "delete", headers={"Content-MD5": _md5_b64(body)}, body=body), "unordered")]
    out.append((s.send("GET", "/{b}", "list-type=2"), ""))
    return out


def case_conditionals(s):
    s.send("PUT", "/{b}")
    etag = s.send("PUT", "/{b}/c", body=DATA).header("etag")
    out = []
    for headers in [
        {"If-Match": etag},
        {"If-Match": '"00000000000000000000000000000000"'},
        {"If-None-Match": etag},
        {"If-None-Match": '"00000000000000000000000000000000"'},
        {"If-Modified-Since": HTTP_DATE_PAST},
        {"If-Modified-Since": HTTP_DATE_FUTURE},
        {"If-Unmodified-Since": HTTP_DATE_PAST},
        {"If-Unmodified-Since": HTTP_DATE_FUTURE},
    ]:
        out.append((s.send("GET", "/{b}/c", headers=headers), "body"))
        out.append((s.send("HEAD", "/{b}/c", headers=headers), ""))
    return out


def case_checksums(s):
    s.send("PUT", "/{b}")
    out = [(s.send("PUT", "/{b}/ck", headers={"x-amz-checksum-crc32": _crc32_b64(DATA)}, body=DATA), "")]
    out.append((s.send("PUT", "/{b}/bad", headers={"x-amz-checksum-crc32": _crc32_b64(b"other")}, body=DATA), ""))
    out.append((s.send("PUT", "/{b}/md5", headers={"Content-MD5": _md5_b64(DATA)}, body=DATA), ""))
    out.append((s.send("PUT", "/{b}/md5bad", headers={"Content-MD5": _md5_b64(b"other")}, body=DATA), ""))
    out.append((s.send("GET", "/{b}/ck", headers={"x-amz-checksum-mode": "ENABLED"}), "body"))
    out.append((s.send("HEAD", "/{b}/ck", headers={"x-amz-checksum-mode": "ENABLED"}), ""))
    out.append((s.send("GET", "/{b}/bad"), ""))
    return out


UTF8_VALUE = "caf\u00e9 \u2615 Gr\u00fc\u00dfe \U0001f600"


def case_utf8_metadata(s):
    s.send("PUT", "/{b}")
    out = [(s.send("PUT", "/{b}/u", headers={"x-amz-meta-name": UTF8_VALUE, "x-amz-meta-plain": "ascii"}, body=b"u"), "")]
    out.append((s.send("HEAD", "/{b}/u"), ""))
    out.append((s.send("GET", "/{b}/u"), "body"))
    return out


def case_presigned_valid(s):
    s.send("PUT", "/{b}")
    s.send("PUT", "/{b}/p", body=DATA)
    out = []
    for expires in (1, 60, 604800):
        out.append((s.get_url(s.presign("GET", "/{b}/p", expires)), "body"))
    past = datetime.datetime.utcnow() - datetime.timedelta(seconds=120)
    out.append((s.get_url(s.presign("GET", "/{b}/p", 60, when=past)), ""))
    return out


def _presigned(s, expires=60, when=None):
    s.send("PUT", "/{b}")
    s.send("PUT", "/{b}/p", body=DATA)
    return [(s.get_url(s.presign("GET", "/{b}/p", expires, when=when)), "")]


CASES = {
    "buckets": case_buckets,
    "objects": case_objects,
    "ranges": case_ranges,
    "listings": case_listings,
    "copy": case_copy,
    "multipart": case_multipart,
    "batch-delete": case_batch_delete,
    "conditionals": case_conditionals,
    "checksums": case_checksums,
    "utf8-metadata": case_utf8_metadata,
    "presigned-valid-and-expired": case_presigned_valid,
    "presigned-expires-0": lambda s: _presigned(s, expires=0),
    "presigned-expires-negative": lambda s: _presigned(s, expires=-1),
    "presigned-expires-not-a-number": lambda s: _presigned(s, expires="abc"),
    "presigned-expires-over-a-week": lambda s: _presigned(s, expires=604801),
    "presigned-date-in-the-future": lambda s: _presigned(
        s, when=datetime.datetime.utcnow() + datetime.timedelta(hours=1)
    ),
}

# S3's answers (status, code, message) where the gateway answers as S3
# (and, for X-Amz-Expires=0, where the store does too).
S3_ANSWERS = {
    "presigned-expires-0": (403, "AccessDenied", "Request has expired"),
    "presigned-expires-negative": (400, "AuthorizationQueryParametersError", "X-Amz-Expires must be non-negative"),
    "presigned-expires-not-a-number": (400, "AuthorizationQueryParametersError", "X-Amz-Expires should be a number"),
    "presigned-expires-over-a-week": (
        400,
        "AuthorizationQueryParametersError",
        "X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than 604800 seconds",
    ),
    "presigned-date-in-the-future": (403, "AccessDenied", "Request is not valid yet"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_same_answers(sides, case):
    direct, via = sides
    from_store = CASES[case](direct)
    from_gateway = CASES[case](via)
    want = [direct.summary(a, what) for a, what in from_store]
    got = [via.summary(a, what) for a, what in from_gateway]
    if case in GATEWAY_ANSWERS_AS_S3:
        status, code, message = S3_ANSWERS[case]
        [(answer, _)] = from_gateway
        assert (answer.status, answer.code()) == (status, code), f"{case}: store {want}, gateway {got}"
        assert message in " ".join(answer.xml("Message")), answer.body
        return
    assert len(got) == len(want)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"{case} step {i}: store {w}\ngateway {g}"
    if case in S3_ANSWERS:
        status, code, message = S3_ANSWERS[case]
        [(answer, _)] = from_gateway
        assert (answer.status, answer.code()) == (status, code)
        assert message in " ".join(answer.xml("Message")), answer.body


# --------------------------------------------------------------------------
# Virtual-hosted style: boto3 with addressing_style='virtual' against the
# gateway started with --domain localhost.


@pytest.fixture
def resolve_localhost_names(monkeypatch):
    """`<bucket>.localhost` resolves to 127.0.0.1 (RFC 6761; most resolvers
    do it, where this one does not the test does)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith("." + DOMAIN):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _requests_counted(gateway, op, path):
    with urllib.request.urlopen(gateway + "/metrics") as r:
        text = r.read().decode()
    series = f'hipobj_requests_total{{op="{op}",path="{path}"}} '
    for line in text.splitlines():
        if line.startswith(series):
            return int(float(line[len(series) :]))
    return 0


def test_boto3_virtual_hosted(store, gateway, resolve_localhost_names):
    port = urllib.parse.urlsplit(gateway).port
    sent = []
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=f"http://{DOMAIN}:{port}",
        aws_access_key_id=GATEWAY_KEY[0],
        aws_secret_access_key=GATEWAY_KEY[1],
        region_name=REGION,
        config=Config(
            s3={"addressing_style": "virtual"},
            signature_version="s3v4",
            retries={"max_attempts": 1, "mode": "standard"},
        ),
    )
    client.meta.events.register("before-send.s3.*", lambda request, **_: sent.append(request.url))
    bucket = f"vhost-{uuid.uuid4().hex[:10]}"
    puts = _requests_counted(gateway, "PutObject", "http")
    lists = _requests_counted(gateway, "ListObjectsV2", "http")
    client.create_bucket(Bucket=bucket)
    data = os.urandom(100_000)
    r = client.put_object(Bucket=bucket, Key="dir/v.bin", Body=data, Metadata={"k": "v"})
    assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    assert all(urllib.parse.urlsplit(u).hostname == f"{bucket}.{DOMAIN}" for u in sent), sent
    got = client.get_object(Bucket=bucket, Key="dir/v.bin")
    assert got["Body"].read() == data
    assert got["Metadata"] == {"k": "v"}
    r = client.get_object(Bucket=bucket, Key="dir/v.bin", Range="bytes=10-19")
    assert r["ContentRange"] == f"bytes 10-19/{len(data)}"
    assert r["Body"].read() == data[10:20]
    listed = client.list_objects_v2(Bucket=bucket, Prefix="dir/")
    assert [o["Key"] for o in listed["Contents"]] == ["dir/v.bin"]
    # The metrics count them as the path-style operations they are.
    assert _requests_counted(gateway, "PutObject", "http") == puts + 1
    assert _requests_counted(gateway, "ListObjectsV2", "http") == lists + 1
    # A presigned virtual-hosted URL.
    url = client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "dir/v.bin"}, ExpiresIn=60)
    assert urllib.parse.urlsplit(url).hostname == f"{bucket}.{DOMAIN}"
    u = urllib.parse.urlsplit(url)
    a = Side._send("GET", f"http://127.0.0.1:{port}{u.path}?{u.query}", {"Host": u.netloc}, b"")
    assert a.status == 200 and a.body == data
    # The object is in the store under that bucket (path-style, straight).
    endpoint, access, secret = store
    direct = Side("store", endpoint, access, secret, bucket)
    a = direct.send("GET", "/{b}/dir/v.bin")
    assert a.status == 200 and a.body == data
    client.delete_object(Bucket=bucket, Key="dir/v.bin")
    client.delete_bucket(Bucket=bucket)
    a = direct.send("HEAD", "/{b}")
    assert a.status == 404


# --------------------------------------------------------------------------
# What boto3 itself sends (aws-chunked bodies with trailing checksums, its
# transfer manager's multipart uploads, presigned PUTs), to both sides.


def _boto3(url, access, secret, **s3):
    return boto3.session.Session().client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        region_name=REGION,
        config=Config(
            s3={"addressing_style": "path", **s3},
            signature_version="s3v4",
            retries={"max_attempts": 1, "mode": "standard"},
        ),
    )


def _force_trailer_checksums(client):
    """PutObject and UploadPart with the checksum in an aws-chunked trailer
    (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`), as botocore sends over https."""

    def force(params, **_):
        algorithm = params["context"].get("checksum", {}).get("request_algorithm")
        if isinstance(algorithm, dict):
            algorithm["in"] = "trailer"

    client.meta.events.register("before-call.s3.PutObject", force)
    client.meta.events.register("before-call.s3.UploadPart", force)


def _meta(r):
    h = r["ResponseMetadata"]["HTTPHeaders"]
    keep = {k: v for k, v in h.items() if k == "etag" or k.startswith("x-amz-checksum-") or k.startswith("x-amz-meta-")}
    return r["ResponseMetadata"]["HTTPStatusCode"], keep


def _trailer_puts(client, bucket, trailer=True):
    """PutObject with each checksum in an aws-chunked trailer (or, with
    `trailer=False`, in a header, as boto3 sends it over http), then HEAD
    with ChecksumMode: the answers."""
    client.create_bucket(Bucket=bucket)
    if trailer:
        _force_trailer_checksums(client)
    data = bytes(range(256)) * 4099
    out = []
    for algorithm in (None, "CRC32", "SHA1", "SHA256"):
        extra = {} if algorithm is None else {"ChecksumAlgorithm": algorithm}
        out.append(_meta(client.put_object(Bucket=bucket, Key=f"t-{algorithm}", Body=data, **extra)))
        out.append(_meta(client.head_object(Bucket=bucket, Key=f"t-{algorithm}", ChecksumMode="ENABLED")))
    for algorithm in (None, "CRC32", "SHA1", "SHA256"):
        client.delete_object(Bucket=bucket, Key=f"t-{algorithm}")
    client.delete_bucket(Bucket=bucket)
    return out


def test_boto3_trailer_checksums_reach_the_store(store, gateway):
    """aws-chunked bodies with a trailing checksum: the gateway checks the
    checksum and passes it on in a trailer of its own, so the store echoes
    and records it as it does for the client straight.

    In front of a store that refuses such bodies straight (Ceph RGW 16:
    `store_probe`), the gateway runs with `--upstream-no-checksum-trailers`
    and sends them plain; its answers are then those the store gives boto3
    straight over http, where the checksum goes in a header (RGW 16 neither
    echoes nor records it)."""
    endpoint, access, secret = store
    probed = store_probe.probe(*store)
    tag = uuid.uuid4().hex[:10]
    want = _trailer_puts(_boto3(endpoint, access, secret), f"difft-{tag}-s", trailer=probed.takes_checksum_trailers)
    got = _trailer_puts(_boto3(gateway, *GATEWAY_KEY), f"difft-{tag}-g")
    assert got == want
    # Checksums come back where the store echoes them straight (s3s-fs, S3).
    echoed = any(k.startswith("x-amz-checksum-") for _, h in got for k in h)
    assert echoed == probed.echoes_checksums, got


def _boto3_session(client, bucket, tmp_path):
    from boto3.s3.transfer import TransferConfig

    out = []
    client.create_bucket(Bucket=bucket)
    data = bytes(range(256)) * 4099
    src = tmp_path / f"{bucket}.bin"
    src.write_bytes(data * 5)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=2)
    client.upload_file(str(src), bucket, "multi", Config=cfg)
    out.append(_meta(client.head_object(Bucket=bucket, Key="multi")))
    url = client.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "pre"}, ExpiresIn=60)
    with urllib.request.urlopen(urllib.request.Request(url, data=b"presigned", method="PUT")) as r:
        out.append((r.status, {"etag": r.headers.get("etag")}))
    out.append(_meta(client.head_object(Bucket=bucket, Key="pre")))
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=obj["Key"])
    client.delete_bucket(Bucket=bucket)
    return out


def test_boto3_same_answers(store, gateway, tmp_path):
    endpoint, access, secret = store
    tag = uuid.uuid4().hex[:10]
    want = _boto3_session(_boto3(endpoint, access, secret), f"diffb-{tag}-s", tmp_path)
    got = _boto3_session(_boto3(gateway, *GATEWAY_KEY), f"diffb-{tag}-g", tmp_path)
    assert len(got) == len(want)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"step {i}: store {w}\ngateway {g}"
