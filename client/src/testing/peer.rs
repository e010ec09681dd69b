//! A peer that plays the server's part of the protocol over any provider.
//!
//! The peer is the smallest honest server: it runs the connect-first RC
//! flow of docs/protocol.md (handshake, transfer by one-sided RDMA after
//! both QPs are in RTS, reply 421 for an unknown pair), keeps objects in
//! memory, and can be told to decline RDMA or to behave like hipObject's
//! original test server (RDMA at once, with no handshake). The RDMA S3
//! front (gateway and test server) replaces it for end-to-end tests.

use hipobj_fabric::error::Result as FabricResult;
use hipobj_fabric::rc::{self, RcParams, RcPeer};
use hipobj_fabric::{
    AccessFlags, CompletionQueue, Device, ProtectionDomain, QpCap, QpType, QueuePair, RemoteAddr,
    SendOp, SendWr, WcStatus,
};
use hipobj_wire::{Gid, Token, Transport};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The largest message one work request moves; larger transfers are split.
const WR_LIMIT: u64 = 1 << 30;
/// The largest transfer the peer accepts.
const MAX_TRANSFER: u64 = 4 << 30;

#[derive(Debug)]
struct Pair {
    cq: CompletionQueue,
    qp: QueuePair,
}

/// A pair is found by the client QP's GID and number.
type PairKey = (Gid, u32);

/// What the peer has done, for assertions.
#[derive(Debug, Default)]
pub struct PeerStats {
    /// Handshakes answered.
    pub handshakes: AtomicUsize,
    /// Transfers that moved data.
    pub transfers: AtomicUsize,
    /// Transfers answered 421.
    pub reconnects: AtomicUsize,
    /// RDMA operations that failed.
    pub failures: AtomicUsize,
}

/// A server peer over one RDMA device.
#[derive(Debug)]
pub struct ServerPeer {
    pd: ProtectionDomain,
    device: Device,
    gid: Gid,
    pairs: Mutex<HashMap<PairKey, Arc<Mutex<Pair>>>>,
    objects: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// Answer every request with 501 (RDMA declined).
    pub decline: AtomicBool,
    /// Behave as hipObject's original test server: no handshake (answer it
    /// with a plain 200), and RDMA at once to the QP a token names.
    pub seed_flow: AtomicBool,
    /// What happened.
    pub stats: PeerStats,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ServerPeer {
    /// A peer on `device`.
    pub fn new(device: Device) -> FabricResult<ServerPeer> {
        let gid = device
            .gid_table(1)?
            .first()
            .map(|e| e.gid)
            .unwrap_or_default();
        Ok(ServerPeer {
            pd: device.alloc_pd()?,
            device,
            gid,
            pairs: Mutex::new(HashMap::new()),
            objects: Mutex::new(HashMap::new()),
            decline: AtomicBool::new(false),
            seed_flow: AtomicBool::new(false),
            stats: PeerStats::default(),
        })
    }

    /// Stores an object.
    pub fn put_object(&self, key: &str, bytes: Vec<u8>) {
        lock(&self.objects).insert(key.to_string(), Arc::new(bytes));
    }

    /// An object's bytes.
    pub fn object(&self, key: &str) -> Option<Arc<Vec<u8>>> {
        lock(&self.objects).get(key).cloned()
    }

    /// Forgets every connected pair, as a restarted server would.
    pub fn forget_pairs(&self) {
        lock(&self.pairs).clear();
    }

    /// Connected pairs.
    pub fn pairs(&self) -> usize {
        lock(&self.pairs).len()
    }

    fn new_pair(&self, client: &Token) -> FabricResult<Pair> {
        let cq = self.device.create_cq(16)?;
        let qp = self.pd.create_qp(QpType::Rc, &cq, &cq, QpCap::default())?;
        // The server's QP is only ever a requester: it allows peers nothing.
        rc::to_init(&qp, 1, AccessFlags::EMPTY)?;
        rc::connect(
            &qp,
            &RcPeer {
                qp_num: client.qp_num,
                gid: client.gid,
                lid: client.lid,
            },
            &RcParams::default(),
        )?;
        Ok(Pair { cq, qp })
    }

    /// Serves one S3 request carrying `token`: `method` is GET, PUT or
    /// HEAD. Returns the `x-amz-rdma-reply` value.
    pub fn serve(&self, method: &str, key: &str, token: &str) -> String {
        if self.decline.load(Ordering::Relaxed) {
            return "501".into();
        }
        let Ok(t) = Token::decode(token) else {
            return "400".into();
        };
        if t.transport != Transport::Rc {
            return "501".into();
        }
        let seed = self.seed_flow.load(Ordering::Relaxed);
        if t.is_handshake() {
            if seed {
                return "200".into();
            }
            return match self.new_pair(&t) {
                Ok(pair) => {
                    let server = Token {
                        transport: Transport::Rc,
                        qp_num: pair.qp.qp_num(),
                        gid: self.gid,
                        rkey: 0,
                        addr: 0,
                        len: 0,
                        port: 1,
                        lid: 0,
                    };
                    lock(&self.pairs).insert((t.gid, t.qp_num), Arc::new(Mutex::new(pair)));
                    self.stats.handshakes.fetch_add(1, Ordering::Relaxed);
                    format!("200:{}", server.encode())
                }
                Err(e) => {
                    tracing::warn!(error = %e, "peer: handshake failed");
                    "500".into()
                }
            };
        }
        if t.len > MAX_TRANSFER {
            return "400".into();
        }
        let pair = if seed {
            match self.new_pair(&t) {
                Ok(p) => Arc::new(Mutex::new(p)),
                Err(_) => return "500".into(),
            }
        } else {
            match lock(&self.pairs).get(&(t.gid, t.qp_num)).cloned() {
                Some(p) => p,
                None => {
                    self.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                    return "421".into();
                }
            }
        };
        let pair = lock(&pair);
        let result = match method {
            "GET" => self.rdma_get(&pair, key, &t),
            "PUT" => self.rdma_put(&pair, key, &t),
            _ => Err("400".to_string()),
        };
        match result {
            Ok(status) => {
                self.stats.transfers.fetch_add(1, Ordering::Relaxed);
                status
            }
            Err(status) => {
                if status == "500" {
                    self.stats.failures.fetch_add(1, Ordering::Relaxed);
                    // A pair whose QP failed is gone: the client reconnects.
                    lock(&self.pairs).remove(&(t.gid, t.qp_num));
                }
                status
            }
        }
    }

    fn run(
        &self,
        pair: &Pair,
        op: impl Fn(RemoteAddr) -> SendOp,
        local: &hipobj_fabric::RegisteredBuffer,
        t: &Token,
        len: u64,
    ) -> Result<(), String> {
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(WR_LIMIT);
            let sge = local.sge(done, n as u32).map_err(|_| "500".to_string())?;
            let wr = SendWr {
                wr_id: done,
                op: op(RemoteAddr {
                    addr: t.addr.wrapping_add(done),
                    rkey: t.rkey,
                }),
                sg_list: vec![sge],
                signaled: true,
                dc: None,
            };
            pair.qp.post_send(&wr).map_err(|_| "500".to_string())?;
            let wc = pair
                .cq
                .wait_one(Duration::from_secs(60))
                .map_err(|_| "500".to_string())?;
            match wc {
                Some(wc) if wc.status == WcStatus::Success => {}
                other => {
                    tracing::warn!(completion = ?other, "peer: RDMA failed");
                    return Err("500".into());
                }
            }
            done += n;
        }
        Ok(())
    }

    fn rdma_get(&self, pair: &Pair, key: &str, t: &Token) -> Result<String, String> {
        let obj = self.object(key).ok_or_else(|| "404".to_string())?;
        let n = t.len.min(obj.len() as u64);
        let mut local = self
            .pd
            .alloc_buffer(n.max(1) as usize, AccessFlags::EMPTY)
            .map_err(|_| "500".to_string())?;
        local
            .buf_mut()
            .write_at(0, &obj[..n as usize])
            .map_err(|_| "500".to_string())?;
        self.run(pair, SendOp::RdmaWrite, &local, t, n)?;
        Ok("200".into())
    }

    fn rdma_put(&self, pair: &Pair, key: &str, t: &Token) -> Result<String, String> {
        let local = self
            .pd
            .alloc_buffer(t.len.max(1) as usize, AccessFlags::LOCAL_WRITE)
            .map_err(|_| "500".to_string())?;
        self.run(pair, SendOp::RdmaRead, &local, t, t.len)?;
        let mut bytes = vec![0u8; t.len as usize];
        local
            .buf()
            .read_at(0, &mut bytes)
            .map_err(|_| "500".to_string())?;
        self.put_object(key, bytes);
        Ok("200".into())
    }
}
