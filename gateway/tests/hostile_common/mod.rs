//! A hostile (or merely stalled) RDMA client for the gateway's attack
//! tests: a soft-provider responder written from the wire format, which a
//! real client cannot be made to misbehave as. It listens on 127.0.0.1,
//! answers the connection hello, acknowledges WRITEs and records every
//! payload byte it receives with its address, and can stop reading its
//! socket (a suspended process looks the same to the gateway) and resume.

#![allow(dead_code)]

use hipobj_fabric::soft::packet::{
    Hello, HelloAck, ReqOp, Request, Response, HELLO_LEN, REQUEST_LEN,
};
use hipobj_testkit::s3::S3;
use hipobj_wire::{Gid, Token, Transport};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the fake client saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// (remote address, payload) of every WRITE segment read.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// Connections accepted.
    pub connections: usize,
    /// Connections open now.
    pub open: usize,
    /// Most connections open at once.
    pub peak_open: usize,
}

#[derive(Debug, Default)]
struct State {
    seen: Seen,
    stalled: bool,
    /// Dropped: the client is gone, and answers nothing any more.
    closed: bool,
}

/// A fake client QP (or DC target): its number carries its listener's port,
/// as the soft provider's do.
#[derive(Debug)]
pub struct FakePeer {
    /// Its QP (or DCT) number.
    pub qpn: u32,
    /// Its GID (::ffff:127.0.0.1).
    pub gid: Gid,
    state: Arc<(Mutex<State>, Condvar)>,
    port: u16,
}

impl Drop for FakePeer {
    /// The client goes away: its listener closes and its connections
    /// answer nothing more.
    fn drop(&mut self) {
        self.state.0.lock().unwrap().closed = true;
        self.state.1.notify_all();
        // Wakes the accept loop, which then ends and closes the listener.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl FakePeer {
    /// Listens on 127.0.0.1; `stalled` from the start or not.
    pub fn start(stalled: bool) -> FakePeer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new((
            Mutex::new(State {
                seen: Seen::default(),
                stalled,
                closed: false,
            }),
            Condvar::new(),
        ));
        let s = state.clone();
        std::thread::spawn(move || {
            for c in listener.incoming() {
                let Ok(c) = c else { return };
                if s.0.lock().unwrap().closed {
                    return;
                }
                let s = s.clone();
                std::thread::spawn(move || serve(c, s));
            }
        });
        FakePeer {
            qpn: (u32::from(port) << 8) | 1,
            gid: Gid::from_ipv4(Ipv4Addr::LOCALHOST),
            state,
            port,
        }
    }

    /// Stops reading (every connection, from its next header on).
    pub fn stall(&self) {
        self.state.0.lock().unwrap().stalled = true;
    }

    /// Reads again.
    pub fn resume(&self) {
        self.state.0.lock().unwrap().stalled = false;
        self.state.1.notify_all();
    }

    /// Runs `f` on what it saw.
    pub fn seen<R>(&self, f: impl FnOnce(&Seen) -> R) -> R {
        f(&self.state.0.lock().unwrap().seen)
    }

    /// Waits until no connection is open (every one read to its end), up
    /// to `limit`; true if so.
    pub fn wait_closed(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut g = self.state.0.lock().unwrap();
        while g.seen.open > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self.state.1.wait_timeout(g, left).unwrap().0;
        }
        true
    }

    /// The handshake token naming this fake QP.
    pub fn handshake_token(&self) -> String {
        self.token(Transport::Rc, 0, 0, 0)
    }

    /// A token naming a buffer of `len` bytes at `addr` with `rkey`.
    pub fn token(&self, transport: Transport, addr: u64, len: u64, rkey: u32) -> String {
        Token {
            transport,
            qp_num: self.qpn,
            gid: self.gid,
            rkey,
            addr,
            len,
            port: 1,
            lid: 0,
        }
        .encode()
    }
}

fn serve(mut c: TcpStream, s: Arc<(Mutex<State>, Condvar)>) {
    {
        let mut g = s.0.lock().unwrap();
        g.seen.connections += 1;
        g.seen.open += 1;
        g.seen.peak_open = g.seen.peak_open.max(g.seen.open);
    }
    let _ = session(&mut c, &s);
    let mut g = s.0.lock().unwrap();
    g.seen.open -= 1;
    s.1.notify_all();
}

fn session(c: &mut TcpStream, s: &Arc<(Mutex<State>, Condvar)>) -> std::io::Result<()> {
    let mut h = [0u8; HELLO_LEN];
    c.read_exact(&mut h)?;
    if Hello::decode(&h).is_none() {
        return Ok(());
    }
    c.write_all(&HelloAck::PLAIN.encode())?;
    loop {
        {
            let mut g = s.0.lock().unwrap();
            while g.stalled && !g.closed {
                g = s.1.wait(g).unwrap();
            }
            if g.closed {
                return Ok(());
            }
        }
        let mut hdr = [0u8; REQUEST_LEN];
        c.read_exact(&mut hdr)?;
        if s.0.lock().unwrap().closed {
            return Ok(());
        }
        let Some(req) = Request::decode(&hdr) else {
            return Ok(());
        };
        let mut payload = vec![0u8; req.seg_len as usize];
        c.read_exact(&mut payload)?;
        if matches!(req.op, ReqOp::Write | ReqOp::WriteImm) && !payload.is_empty() {
            s.0.lock().unwrap().seen.writes.push((req.va, payload));
        }
        // The gateway may have shut the connection already.
        let _ = c.write_all(&Response::ack(req.psn).encode());
    }
}

/// Sends a signed request with `token` in `x-amz-rdma-token`.
pub fn rdma(s3: &S3, method: http::Method, path: &str, token: &str) -> hipobj_testkit::s3::Answer {
    s3.send(
        method,
        path,
        &[(hipobj_wire::headers::RDMA_TOKEN, token)],
        Vec::new(),
        true,
    )
}

/// A gauge or counter's value from the gateway's `/metrics` (summed over
/// label sets); 0 when absent.
pub fn metric(url: &str, name: &str) -> f64 {
    let s3 = S3::new(url);
    let body = s3.get_unsigned("/metrics").text();
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split([' ', '{']).next().is_some_and(|n| n == name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls `cond` every 50 ms until it holds or `limit` passes.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Threads of process `pid`.
pub fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

/// Open file descriptors of process `pid`.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The head of a request to `url` + `path`, with `headers`, signed by
/// `(access_key, secret)` with `payload_hash` as its payload, as it goes on
/// the wire (for attacks written to a raw socket).
pub fn signed_wire_head(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    payload_hash: &str,
    (access_key, secret): (&str, &str),
) -> String {
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("{url}{path}"));
    for (k, v) in headers {
        b = b.header(*k, v.as_str());
    }
    let mut req = b.body(hipobj_gateway::body::Body::empty()).unwrap();
    hipobj_gateway::upstream::sign_request(
        &mut req,
        access_key,
        secret,
        hipobj_testkit::REGION,
        payload_hash,
        std::time::SystemTime::now(),
    )
    .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in req.headers() {
        head.push_str(&format!("{k}: {}\r\n", v.to_str().unwrap()));
    }
    head.push_str("\r\n");
    head
}
