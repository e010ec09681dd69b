//! An `https://` upstream: s3s-fs served over TLS (tokio-rustls) on
//! loopback by this process, its certificate signed by a CA made here with
//! rcgen. Reached by `RemoteUpstream` with that CA trusted, and by the real
//! `hipobj-gateway` binary with `--upstream-ca-file`; a CA that did not sign
//! it fails with a clear error.

#![forbid(unsafe_code)]

#[allow(dead_code)]
use crate::upstream_common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http::{Method, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair as CertKey,
    KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use hipobj_gateway::body::Body;
use hipobj_gateway::config::KeyPair;
use hipobj_gateway::upstream::{
    CaCerts, Payload, RemoteOptions, RemoteUpstream, Upstream, UpstreamError,
};

const ACCESS_KEY: &str = "TLSTESTKEY";
const SECRET_KEY: &str = "tls-test-secret-key-0123456789";

fn key_pair() -> KeyPair {
    KeyPair {
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
    }
}

/// A CA, and a server certificate it signed for `localhost` and
/// `127.0.0.1`; PEM files of both CA certificates in `dir`.
struct Pki {
    ca_pem: PathBuf,
    other_ca_pem: PathBuf,
    server_cert: CertificateDer<'static>,
    server_key: PrivateKeyDer<'static>,
}

fn make_ca(name: &str) -> CertifiedIssuer<'static, CertKey> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, CertKey::generate().unwrap()).unwrap()
}

fn pki(dir: &Path) -> Pki {
    let ca = make_ca("hipobj test CA");
    let other = make_ca("another CA");
    let key = CertKey::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "hipobj test store");
    let cert = params.signed_by(&key, &*ca).unwrap();
    let ca_pem = dir.join("ca.pem");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    let other_ca_pem = dir.join("other-ca.pem");
    std::fs::write(&other_ca_pem, other.pem()).unwrap();
    Pki {
        ca_pem,
        other_ca_pem,
        server_cert: cert.der().clone(),
        server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

/// Serves s3s-fs over `root` in TLS on a loopback port until the runtime
/// ends; counts the TCP connections it accepts.
async fn serve_tls(root: &Path, pki: &Pki) -> (SocketAddr, Arc<AtomicUsize>) {
    let fs = s3s_fs::FileSystem::new(root).unwrap();
    let mut builder = S3ServiceBuilder::new(fs);
    builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
    let service = builder.build();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![pki.server_cert.clone()], pki.server_key.clone_key())
    .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let service = service.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(socket).await else {
                    return;
                };
                let _ = ConnBuilder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, accepted)
}

fn trusting(ca: &Path) -> RemoteOptions {
    RemoteOptions {
        ca: CaCerts::from_pem_file(ca).unwrap(),
        ..RemoteOptions::default()
    }
}

#[tokio::test]
async fn s3_flow_over_tls_with_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let (addr, _) = serve_tls(&root, &pki).await;
    for host in [
        format!("127.0.0.1:{}", addr.port()),
        format!("localhost:{}", addr.port()),
    ] {
        let endpoint = format!("https://{host}");
        let up =
            RemoteUpstream::with_options(&endpoint, key_pair(), "us-east-1", trusting(&pki.ca_pem))
                .unwrap();
        assert_eq!(up.endpoint(), endpoint);
        upstream_common::s3_flow(&up).await;
        assert!(root.join("bucket/big.bin").is_file());
        // The flow deletes its bucket's objects but the multipart one.
        std::fs::remove_dir_all(root.join("bucket")).unwrap();
    }
}

/// The failure of a request to an https store whose certificate the
/// options do not trust; checks that it was tried once.
async fn untrusted(options: RemoteOptions) -> UpstreamError {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let (addr, accepted) = serve_tls(dir.path(), &pki).await;
    let up = RemoteUpstream::with_options(
        &format!("https://127.0.0.1:{}", addr.port()),
        key_pair(),
        "us-east-1",
        options,
    )
    .unwrap();
    let req = http::Request::builder()
        .uri("/bucket/k")
        .body(Body::empty())
        .unwrap();
    let err = up.send(req, Payload::Unsigned).await.unwrap_err();
    // Not retried: the certificate will not become trusted.
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "{err}");
    assert!(!up.ready().await);
    err
}

#[tokio::test]
async fn a_ca_that_did_not_sign_the_store_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let other = pki(dir.path()).other_ca_pem;
    let err = untrusted(trusting(&other)).await;
    assert!(matches!(err, UpstreamError::Connect(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "cannot connect to the store: TLS handshake with the store failed: invalid peer \
         certificate: UnknownIssuer (the store's certificate is not signed by a trusted CA: \
         pass the CA's certificate with --upstream-ca-file)"
    );
}

#[tokio::test]
async fn the_system_roots_alone_do_not_trust_a_private_ca() {
    let err = untrusted(RemoteOptions::default()).await;
    assert!(
        err.to_string()
            .starts_with("cannot connect to the store: TLS handshake with the store failed: "),
        "{err}"
    );
}

#[tokio::test]
async fn an_http_client_does_not_speak_to_an_https_store_in_the_clear() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let (addr, _) = serve_tls(dir.path(), &pki).await;
    let up = RemoteUpstream::new(
        &format!("http://127.0.0.1:{}", addr.port()),
        key_pair(),
        "us-east-1",
    )
    .unwrap();
    assert!(!up.ready().await);
}

/// The gateway binary in front of the TLS store: `--upstream https://...`
/// with the CA in `HIPOBJ_UPSTREAM_CA_FILE`; signed requests through it,
/// byte-exact, and the object in the store's directory. With the wrong CA
/// it starts, is not ready, and answers 502.
#[test]
fn the_gateway_binary_in_front_of_an_https_store() {
    use hipobj_testkit::{assert_object, gateway_with, pattern, try_gateway_with, S3};
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_hipobj-gateway"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let (addr, _) = rt.block_on(serve_tls(&root, &pki));
    let endpoint = format!("https://localhost:{}", addr.port());
    let args = ["--upstream", &endpoint, "--upstream-access-key", ACCESS_KEY];
    let ca = pki.ca_pem.to_str().unwrap();
    let gw = gateway_with(
        bin,
        &args,
        &[
            ("HIPOBJ_UPSTREAM_SECRET_KEY", SECRET_KEY),
            ("HIPOBJ_UPSTREAM_CA_FILE", ca),
        ],
    );
    let s3 = S3::new(&gw.url);
    let ready = s3.get_unsigned("/health/ready");
    assert_eq!(
        ready.status,
        StatusCode::OK,
        "{} {}",
        ready.text(),
        gw.log()
    );
    s3.create_bucket("tls");
    let data = pattern(5, 300_000);
    let a = s3.put_plain("/tls/obj", data.clone());
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert_object(&s3, "/tls/obj", &data);
    assert_eq!(std::fs::read(root.join("tls/obj")).unwrap(), data);
    // Straight to the store in TLS, for comparison.
    let direct =
        RemoteUpstream::with_options(&endpoint, key_pair(), "us-east-1", trusting(&pki.ca_pem))
            .unwrap();
    let a = rt.block_on(upstream_common::call(
        &direct,
        Method::GET,
        "/tls/obj",
        bytes::Bytes::new(),
    ));
    assert_eq!(a.body, data);
    drop(gw);

    let other = pki.other_ca_pem.to_str().unwrap();
    let gw = gateway_with(
        bin,
        &args,
        &[
            ("HIPOBJ_UPSTREAM_SECRET_KEY", SECRET_KEY),
            ("HIPOBJ_UPSTREAM_CA_FILE", other),
        ],
    );
    let s3 = S3::new(&gw.url);
    let ready = s3.get_unsigned("/health/ready");
    assert_eq!(
        ready.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        ready.text()
    );
    assert!(ready.text().contains("\"store\":false"), "{}", ready.text());
    let a = s3.get_plain("/tls/obj");
    assert_eq!(a.status, StatusCode::BAD_GATEWAY, "{}", a.text());
    // The operator's log says why.
    let log = gw.log();
    assert!(
        log.contains(
            "TLS handshake with the store failed: invalid peer certificate: UnknownIssuer"
        ),
        "{log}"
    );
    drop(gw);

    // A CA file that is not one stops the gateway at start, named.
    let bad = dir.path().join("bad.pem");
    std::fs::write(&bad, "nothing\n").unwrap();
    match try_gateway_with(
        bin,
        &args,
        &[
            ("HIPOBJ_UPSTREAM_SECRET_KEY", SECRET_KEY),
            ("HIPOBJ_UPSTREAM_CA_FILE", bad.to_str().unwrap()),
        ],
    ) {
        Err(hipobj_testkit::NotStarted {
            status: Some(status),
            log,
            ..
        }) => {
            assert!(!status.success());
            assert!(
                log.contains("--upstream-ca-file: the CA file")
                    && log.contains("holds no PEM CERTIFICATE"),
                "{log}"
            );
        }
        Err(e) => panic!("{e}"),
        Ok(g) => panic!("started at {}", g.url),
    }
}
