//! The S3 flow through a remote upstream: s3s-fs served over loopback TCP
//! by hyper in this process, reached by `RemoteUpstream`.

#![forbid(unsafe_code)]

use crate::upstream_common;

use std::net::SocketAddr;
use std::path::Path;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;

use hipobj_gateway::config::{KeyPair, UpstreamConfig};
use hipobj_gateway::upstream::{self, RemoteUpstream, Upstream, UpstreamError};

const ACCESS_KEY: &str = "REMOTETESTKEY";
const SECRET_KEY: &str = "remote-test-secret-key-0123456789";

fn key_pair() -> KeyPair {
    KeyPair {
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
    }
}

/// Serves s3s-fs over `root` on a loopback port until the runtime ends.
async fn serve_s3s_fs(root: &Path) -> SocketAddr {
    let fs = s3s_fs::FileSystem::new(root).unwrap();
    let mut builder = S3ServiceBuilder::new(fs);
    builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
    let service = builder.build();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                break;
            };
            let service = service.clone();
            tokio::spawn(async move {
                let _ = ConnBuilder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn s3_flow() {
    let dir = tempfile::tempdir().unwrap();
    let addr = serve_s3s_fs(dir.path()).await;
    let up = RemoteUpstream::new(&format!("http://{addr}"), key_pair(), "us-east-1").unwrap();
    upstream_common::s3_flow(&up).await;
    assert!(dir.path().join("bucket/big.bin").is_file());
}

/// s3s-fs echoes `encoding-type=url` without encoding the keys; with
/// `drop_encoding_type` the parameter is not sent, and the listing holds
/// the raw keys without `<EncodingType>`.
#[tokio::test]
async fn encoding_type_is_dropped_when_asked() {
    use upstream_common::call;
    let dir = tempfile::tempdir().unwrap();
    let addr = serve_s3s_fs(dir.path()).await;
    let endpoint = format!("http://{addr}");
    let plain = RemoteUpstream::new(&endpoint, key_pair(), "us-east-1").unwrap();
    let dropping = RemoteUpstream::with_options(
        &endpoint,
        key_pair(),
        "us-east-1",
        upstream::RemoteOptions {
            drop_encoding_type: true,
            ..Default::default()
        },
    )
    .unwrap();
    let put = |target| call(&plain, http::Method::PUT, target, bytes::Bytes::new());
    assert_eq!(put("/bkt").await.status, http::StatusCode::OK);
    assert_eq!(put("/bkt/a%2Bb%2541").await.status, http::StatusCode::OK);
    let list = "/bkt?list-type=2&encoding-type=url";
    let a = call(&plain, http::Method::GET, list, bytes::Bytes::new()).await;
    assert!(
        a.text().contains("<EncodingType>url</EncodingType>"),
        "{}",
        a.text()
    );
    let a = call(&dropping, http::Method::GET, list, bytes::Bytes::new()).await;
    assert_eq!(a.status, http::StatusCode::OK, "{}", a.text());
    assert!(!a.text().contains("EncodingType"), "{}", a.text());
    assert!(a.text().contains("<Key>a+b%41</Key>"), "{}", a.text());
}

#[tokio::test]
async fn wrong_credentials_are_answered_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let addr = serve_s3s_fs(dir.path()).await;
    let wrong = KeyPair {
        access_key: ACCESS_KEY.into(),
        secret_key: "not-the-secret".into(),
    };
    let cfg = UpstreamConfig::Remote {
        endpoint: format!("http://{addr}/"),
        credentials: wrong,
    };
    let up = upstream::build(&cfg, "us-east-1").unwrap();
    assert!(!up.ready().await);
    let a = upstream_common::call(&*up, http::Method::PUT, "/bucket", bytes::Bytes::new()).await;
    assert_eq!(a.status, http::StatusCode::FORBIDDEN, "{}", a.text());
    assert_eq!(
        upstream_common::xml_field(&a.text(), "Code"),
        Some("SignatureDoesNotMatch")
    );
}

#[tokio::test]
async fn unreachable_store_is_a_connect_error() {
    // A port that was just free: nothing listens on it.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let up = RemoteUpstream::new(&format!("http://{addr}"), key_pair(), "us-east-1").unwrap();
    assert!(!up.ready().await);
    let req = http::Request::builder()
        .uri("/b")
        .body(hipobj_gateway::body::Body::empty())
        .unwrap();
    let err = up.send(req, upstream::Payload::Unsigned).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Connect(_)), "{err:?}");
}

#[test]
fn build_needs_no_runtime() {
    let cfg = UpstreamConfig::Remote {
        endpoint: "http://127.0.0.1:9".into(),
        credentials: key_pair(),
    };
    let up = upstream::build(&cfg, "us-east-1").unwrap();
    assert!(up.describe().contains("http://127.0.0.1:9"));
    assert!(!format!("{up:?}").contains(SECRET_KEY));
    let https = UpstreamConfig::Remote {
        endpoint: "https://127.0.0.1:9".into(),
        credentials: key_pair(),
    };
    let up = upstream::build(&https, "us-east-1").unwrap();
    assert!(up.describe().contains("https://127.0.0.1:9"));
    let ftp = UpstreamConfig::Remote {
        endpoint: "ftp://127.0.0.1:9".into(),
        credentials: key_pair(),
    };
    assert!(matches!(
        upstream::build(&ftp, "us-east-1"),
        Err(UpstreamError::InvalidEndpoint { .. })
    ));
}
