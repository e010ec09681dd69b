//! s3s-fs served in-process: an S3 server without RDMA.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::s3::{AK, SK};

/// A runtime for in-test servers, which may be dropped inside async tests
/// (it shuts down in the background).
#[derive(Debug)]
pub struct BgRuntime(Option<tokio::runtime::Runtime>);

impl BgRuntime {
    /// A multi-threaded runtime with 2 workers.
    #[allow(clippy::new_without_default)]
    pub fn new() -> BgRuntime {
        BgRuntime(Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ))
    }

    /// The runtime.
    pub fn rt(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().unwrap()
    }

    /// A listener on a free loopback port, for this runtime.
    pub fn listener(&self) -> tokio::net::TcpListener {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let _g = self.rt().enter();
        tokio::net::TcpListener::from_std(l).unwrap()
    }
}

impl Drop for BgRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// s3s-fs served over loopback in this process, signing keys [`AK`] and
/// [`SK`]: an S3 server without RDMA (it ignores `x-amz-rdma-token`). Its
/// files are under `dir`.
#[derive(Debug)]
pub struct PlainS3 {
    _rt: BgRuntime,
    /// Where s3s-fs keeps the buckets.
    pub dir: tempfile::TempDir,
    /// `http://127.0.0.1:port`.
    pub url: String,
}

impl PlainS3 {
    /// Starts serving.
    pub fn start() -> PlainS3 {
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use hyper_util::server::conn::auto::Builder as ConnBuilder;
        use s3s::auth::SimpleAuth;
        use s3s::service::S3ServiceBuilder;

        let dir = tempfile::tempdir().unwrap();
        let rt = BgRuntime::new();
        let fs = s3s_fs::FileSystem::new(dir.path()).unwrap();
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(AK, SK));
        let service = builder.build();
        let listener = rt.listener();
        let addr: SocketAddr = listener.local_addr().unwrap();
        rt.rt().spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let service = service.clone();
                tokio::spawn(async move {
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                });
            }
        });
        PlainS3 {
            _rt: rt,
            dir,
            url: format!("http://{addr}"),
        }
    }

    /// The file s3s-fs keeps an object's bytes in.
    pub fn object_file(&self, bucket: &str, key: &str) -> PathBuf {
        self.dir.path().join(bucket).join(key)
    }
}
