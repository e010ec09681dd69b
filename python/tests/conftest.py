"""Fixtures of the hipobj package's tests: the test server (and the gateway
in front of s3s-fs) as processes, clients, buckets, and an in-process HTTP
proxy that can hide the server's RDMA (a server without RDMA, for the
fallback) or hold requests at a barrier (to show transfers in flight).

The binaries: `$HIPOBJ_TEST_SERVER_BIN` (default
target/debug/hipobj-test-server) and `$HIPOBJ_GATEWAY_BIN` (default
target/debug/hipobj-gateway), relative to the workspace root. The gateway
tests need s3s-fs as `.ci/run` starts it (`HIPOBJ_TEST_S3_ENDPOINT`,
`HIPOBJ_TEST_S3_ACCESS_KEY`, `HIPOBJ_TEST_S3_SECRET_KEY`); they are skipped
without it, unless `REQUIRE_S3S_FS=1`.
"""

import http.client
import http.server
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

import hipobj

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AK = "hipobj-test-key"
SK = "hipobj-test-secret"
MIB = 1 << 20


def _bin(var, default):
    path = os.environ.get(var, default)
    if not os.path.isabs(path):
        path = os.path.join(ROOT, path)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found: build it (cargo build -p {os.path.basename(default)}) or set {var}")
    return path


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    def __init__(self, args, tmp, announce, port=None, env=None, unset=()):
        self.log = open(tmp / "server.log", "ab")
        e = dict(os.environ)
        e.setdefault("RUST_LOG", "warn")
        e["TMPDIR"] = str(tmp)
        e.update(env or {})
        for var in unset:
            e.pop(var, None)
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL, env=e
        )
        if announce:
            line = self.proc.stdout.readline().decode()
            if "http://" not in line:
                self.stop()
                pytest.fail(f"{args[0]} did not start: {line!r}; log {tmp / 'server.log'}")
            self.url = line.strip().rsplit(" ", 1)[-1].rstrip("/")
        else:
            self.url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"{args[0]} did not start; log {tmp / 'server.log'}")
                try:
                    with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                        if r.status == 200:
                            break
                except (OSError, urllib.error.URLError):
                    time.sleep(0.1)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The test server's URL (RDMA on the software provider)."""
    binary = _bin("HIPOBJ_TEST_SERVER_BIN", "target/debug/hipobj-test-server")
    p = Proc([binary, "0", "--rdma-device", "soft0"], tmp_path_factory.mktemp("test-server"), announce=True)
    yield p.url
    p.stop()


@pytest.fixture(scope="session")
def gateway(tmp_path_factory):
    """hipobj-gateway in front of the separately started s3s-fs."""
    store = os.environ.get("HIPOBJ_TEST_S3_ENDPOINT")
    if not store:
        why = "HIPOBJ_TEST_S3_ENDPOINT is not set (s3s-fs as .ci/run starts it)"
        if os.environ.get("REQUIRE_S3S_FS") == "1":
            pytest.fail(why + ", and REQUIRE_S3S_FS=1")
        pytest.skip(why)
    binary = _bin("HIPOBJ_GATEWAY_BIN", "target/debug/hipobj-gateway")
    port = _free_port()
    env = {"HIPOBJ_UPSTREAM_SECRET_KEY": os.environ["HIPOBJ_TEST_S3_SECRET_KEY"]}
    p = Proc(
        [
            binary,
            "--listen",
            f"127.0.0.1:{port}",
            "--rdma-device",
            "soft0",
            "--upstream",
            store,
            "--upstream-access-key",
            os.environ["HIPOBJ_TEST_S3_ACCESS_KEY"],
            "--upstream-drop-encoding-type",
        ],
        tmp_path_factory.mktemp("gateway"),
        announce=False,
        port=port,
        env=env,
        unset=("HIPOBJ_ACCESS_KEY", "HIPOBJ_SECRET_KEY", "HIPOBJ_REGION", "HIPOBJ_DATA_DIR"),
    )
    yield p.url
    p.stop()


def importorskip(name):
    """pytest.importorskip, except where HIPOBJ_REQUIRE_EXTRAS=1 (CI, which
    installs fsspec, pandas, pyarrow, s3fs and torch): there a missing
    module fails the tests instead of skipping them."""
    if os.environ.get("HIPOBJ_REQUIRE_EXTRAS") == "1":
        import importlib

        return importlib.import_module(name)
    return pytest.importorskip(name)


def make_client(endpoint, **kw):
    kw.setdefault("access_key", AK)
    kw.setdefault("secret_key", SK)
    return hipobj.Client(endpoint=endpoint, **kw)


@pytest.fixture(scope="session")
def client(server):
    c = make_client(server)
    assert c.rdma_available, c.rdma_error
    yield c
    c.close()


@pytest.fixture
def bucket(client):
    name = f"py-{uuid.uuid4().hex[:12]}"
    client.create_bucket(name)
    return name


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _forward(self):
        proxy = self.server.owner
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        proxy.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
        if proxy.gate is not None:
            proxy.gate(self.command, self.path, self.headers)
        conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=300)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        head_only = self.command == "HEAD" or resp.status in (204, 304)
        data = b"" if head_only else resp.read()
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            lk = k.lower()
            if proxy.strip_rdma and lk.startswith("x-amz-rdma"):
                continue
            if lk in ("transfer-encoding", "connection") or (lk == "content-length" and not head_only):
                continue
            self.send_header(k, v)
        if not head_only:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class Proxy:
    """An HTTP proxy in this process: `strip_rdma` drops the server's
    `x-amz-rdma-*` answer headers (the client then sees a server without
    RDMA); `gate(method, path, headers)`, when set, runs in the handler's
    thread before a request is forwarded."""

    def __init__(self, upstream, strip_rdma=False):
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream_host, self.upstream_port = host, int(port)
        self.strip_rdma = strip_rdma
        self.gate = None
        self.seen = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def proxy_factory(server):
    made = []

    def make(**kw):
        p = Proxy(server, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()
