//! `decode_body`: the AWS chunked-upload example, chunk streams signed by
//! aws-sigv4 itself, corrupted / reordered / truncated chunks, trailers and
//! trailing checksums (the last chunk held back until they check out), and
//! the plain body's SHA-256.

#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hipobj_gateway::auth::{self, AuthError, AuthSettings, BodyMode, Credentials, Verified};
use hipobj_gateway::body::Body;
use hipobj_gateway::checksum::{Algorithm, Hasher};
use hipobj_gateway::config::KeyPair;
use hipobj_gateway::upstream;
use http::{HeaderValue, Method, Request};
use http_body_util::BodyExt;
use proptest::prelude::*;

const AK: &str = "AKIAIOSFODNN7EXAMPLE";
const SK: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const EXAMPLE_TIME: u64 = 1_369_353_600;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn creds() -> Credentials {
    Credentials::new(&[KeyPair {
        access_key: AK.into(),
        secret_key: SK.into(),
    }])
}

fn settings() -> AuthSettings {
    AuthSettings {
        region: "us-east-1".into(),
        max_skew: Duration::from_secs(900),
        ..AuthSettings::default()
    }
}

/// A body arriving in `step`-byte frames.
fn body_of(bytes: &[u8], step: usize) -> Body {
    let frames: Vec<Result<Bytes, std::io::Error>> = bytes
        .chunks(step.max(1))
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Body::from_stream(futures::stream::iter(frames))
}

/// The data frames, and the error that ended the body, if one did.
async fn drain(mut body: Body) -> (Vec<Bytes>, Option<AuthError>) {
    let mut data = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Ok(d) = f.into_data() {
                    data.push(d);
                }
            }
            Err(e) => {
                let inner = e.into_inner();
                let auth = inner
                    .downcast::<AuthError>()
                    .map(|b| *b)
                    .unwrap_or_else(|e| panic!("not an AuthError: {e}"));
                return (data, Some(auth));
            }
        }
    }
    (data, None)
}

fn concat(frames: &[Bytes]) -> Vec<u8> {
    frames.iter().flat_map(|b| b.iter().copied()).collect()
}

// --- The AWS chunked upload example ---------------------------------------

const SIG1: &str = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648";
const SIG2: &str = "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497";
const SIG3: &str = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9";

fn example_verified() -> Verified {
    let a = format!(
        "AWS4-HMAC-SHA256 Credential={AK}/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    );
    let p = Request::builder()
        .method("PUT")
        .uri("/examplebucket/chunkObject.txt")
        .header("host", "s3.amazonaws.com")
        .header("x-amz-date", "20130524T000000Z")
        .header("x-amz-storage-class", "REDUCED_REDUNDANCY")
        .header("authorization", a)
        .header("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
        .header("content-encoding", "aws-chunked")
        .header("x-amz-decoded-content-length", "66560")
        .header("content-length", "66824")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let v = auth::verify(&p, &creds(), &settings(), at(EXAMPLE_TIME)).unwrap();
    assert_eq!(v.body, BodyMode::ChunkedSigned { trailer: false });
    v
}

fn chunk(data: &[u8], sig: &str) -> Vec<u8> {
    let mut out = format!("{:x};chunk-signature={sig}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

fn example_chunks() -> [Vec<u8>; 3] {
    [
        chunk(&[b'a'; 65536], SIG1),
        chunk(&[b'a'; 1024], SIG2),
        chunk(&[], SIG3),
    ]
}

fn example_body() -> Vec<u8> {
    example_chunks().concat()
}

#[tokio::test]
async fn aws_example_chunked_upload() {
    let v = example_verified();
    let body = example_body();
    assert_eq!(body.len(), 66824);
    for step in [body.len(), 65536, 8192, 1000, 89, 7] {
        let decoded = auth::decode_body(&v, body_of(&body, step));
        assert_eq!(http_body::Body::size_hint(&decoded).exact(), Some(66560));
        let (frames, err) = drain(decoded).await;
        assert!(err.is_none(), "step {step}: {err:?}");
        assert_eq!(frames.len(), 2, "one frame per verified chunk");
        let data = concat(&frames);
        assert_eq!(data.len(), 66560);
        assert!(data.iter().all(|&b| b == b'a'));
    }
}

#[tokio::test]
async fn corrupted_chunk_is_an_error_and_is_not_released() {
    let v = example_verified();
    let [c1, mut c2, c3] = example_chunks();
    // One byte of the second chunk's data.
    let i = c2.len() - 10;
    c2[i] = b'b';
    let (frames, err) = drain(auth::decode_body(&v, body_of(&[c1, c2, c3].concat(), 4096))).await;
    let err = err.expect("an error item");
    assert_eq!(
        (err.code(), err.status().as_u16()),
        ("SignatureDoesNotMatch", 403)
    );
    // Only the first (verified) chunk came out.
    assert_eq!(concat(&frames).len(), 65536);
}

#[tokio::test]
async fn corrupted_signature_hex_is_an_error() {
    let v = example_verified();
    let body = String::from_utf8(example_body())
        .unwrap()
        .replace(SIG1, &SIG1.replace("ad80", "ad81"));
    let (frames, err) = drain(auth::decode_body(&v, body_of(body.as_bytes(), 1 << 20))).await;
    assert_eq!(err.unwrap().code(), "SignatureDoesNotMatch");
    assert!(frames.is_empty());
}

#[tokio::test]
async fn chunks_out_of_order_are_an_error() {
    let v = example_verified();
    let [c1, c2, c3] = example_chunks();
    let (frames, err) = drain(auth::decode_body(
        &v,
        body_of(&[c2.clone(), c1.clone(), c3.clone()].concat(), 4096),
    ))
    .await;
    assert_eq!(err.unwrap().code(), "SignatureDoesNotMatch");
    assert!(frames.is_empty());
    // A chunk replayed.
    let (_, err) = drain(auth::decode_body(
        &v,
        body_of(&[c1.clone(), c1, c2, c3].concat(), 4096),
    ))
    .await;
    assert!(err.is_some());
}

#[tokio::test]
async fn truncated_body_is_an_error() {
    let v = example_verified();
    let body = example_body();
    for cut in [
        0,
        10,
        88,
        1000,
        65626,
        66000,
        body.len() - 86,
        body.len() - 3,
    ] {
        let (_, err) = drain(auth::decode_body(&v, body_of(&body[..cut], 4096))).await;
        let err = err.unwrap_or_else(|| panic!("cut at {cut}: no error"));
        assert!(
            matches!(
                err.code(),
                "IncompleteBody" | "InvalidRequest" | "SignatureDoesNotMatch"
            ),
            "cut at {cut}: {err:?}"
        );
    }
    // Only the final CRLF missing is tolerated: every chunk, the zero-size
    // one included, arrived and verified.
    let (frames, err) = drain(auth::decode_body(
        &v,
        body_of(&body[..body.len() - 2], 4096),
    ))
    .await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(concat(&frames).len(), 66560);
}

#[tokio::test]
async fn oversized_chunk_is_refused() {
    let v = example_verified();
    let body = format!("1000001;chunk-signature={SIG1}\r\n");
    let (_, err) = drain(auth::decode_body(&v, body_of(body.as_bytes(), 4096))).await;
    assert_eq!(err.unwrap().code(), "InvalidRequest");
    // And a chunk longer than x-amz-decoded-content-length.
    let body = format!("10401;chunk-signature={SIG1}\r\n");
    let (_, err) = drain(auth::decode_body(&v, body_of(body.as_bytes(), 4096))).await;
    assert_eq!(err.unwrap().code(), "IncompleteBody");
}

// --- Chunk streams signed by aws-sigv4 -------------------------------------

const NOW: u64 = 1_700_000_000;

/// A request signed by `sign_request` for `payload` and verified.
fn signed_verified(
    payload: &str,
    decoded_len: Option<u64>,
    trailer: Option<&str>,
) -> (Verified, String) {
    let mut b = Request::builder()
        .method(Method::PUT)
        .uri("http://store.example/b/k")
        .header("content-encoding", "aws-chunked");
    if let Some(n) = decoded_len {
        b = b.header("x-amz-decoded-content-length", n.to_string());
    }
    if let Some(t) = trailer {
        b = b.header("x-amz-trailer", t);
    }
    let mut req = b.body(Body::empty()).unwrap();
    upstream::sign_request(&mut req, AK, SK, "us-east-1", payload, at(NOW)).unwrap();
    let (p, _) = req.into_parts();
    let a = p.headers["authorization"].to_str().unwrap();
    let seed = a.rsplit("Signature=").next().unwrap().to_string();
    (
        auth::verify(&p, &creds(), &settings(), at(NOW)).unwrap(),
        seed,
    )
}

fn sigv4_params(
    identity: &aws_smithy_runtime_api::client::identity::Identity,
) -> aws_sigv4::sign::v4::SigningParams<'_, ()> {
    aws_sigv4::sign::v4::SigningParams::builder()
        .identity(identity)
        .region("us-east-1")
        .name("s3")
        .time(at(NOW))
        .settings(())
        .build()
        .unwrap()
}

/// aws-chunked encoding of `pieces`, signed by aws-sigv4, with an optional
/// signed trailer.
fn encode_signed(seed: &str, pieces: &[&[u8]], trailers: &[(&str, &str)]) -> Vec<u8> {
    let identity = aws_credential_types::Credentials::new(AK, SK, None, None, "t").into();
    let params = sigv4_params(&identity);
    let mut prev = seed.to_string();
    let mut out = Vec::new();
    for piece in pieces.iter().chain(std::iter::once(&&b""[..])) {
        let sig = aws_sigv4::sign::v4::sign_chunk(&Bytes::copy_from_slice(piece), &prev, &params)
            .unwrap()
            .into_parts()
            .1;
        out.extend_from_slice(format!("{:x};chunk-signature={sig}\r\n", piece.len()).as_bytes());
        if !piece.is_empty() {
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        prev = sig;
    }
    if trailers.is_empty() {
        out.extend_from_slice(b"\r\n");
    } else {
        let mut headers = aws_smithy_runtime_api::http::Headers::new();
        for (k, v) in trailers {
            headers.insert(k.to_string(), v.to_string());
            out.extend_from_slice(format!("{k}:{v}\r\n").as_bytes());
        }
        let sig = aws_sigv4::sign::v4::sign_trailer(&headers, &prev, &params)
            .unwrap()
            .into_parts()
            .1;
        out.extend_from_slice(format!("x-amz-trailer-signature:{sig}\r\n\r\n").as_bytes());
    }
    out
}

#[tokio::test]
async fn sigv4_signed_chunks_round_trip() {
    let (v, seed) = signed_verified("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", Some(11), None);
    assert_eq!(v.body, BodyMode::ChunkedSigned { trailer: false });
    let body = encode_signed(&seed, &[b"hello", b" ", b"world"], &[]);
    let (frames, err) = drain(auth::decode_body(&v, body_of(&body, 3))).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(concat(&frames), b"hello world");

    // The decoded length disagrees with x-amz-decoded-content-length.
    let (v, seed) = signed_verified("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", Some(12), None);
    let body = encode_signed(&seed, &[b"hello", b" ", b"world"], &[]);
    let (_, err) = drain(auth::decode_body(&v, body_of(&body, 3))).await;
    assert_eq!(err.unwrap().code(), "IncompleteBody");

    // Trailers sent without -TRAILER.
    let (v, seed) = signed_verified("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", None, None);
    let body = encode_signed(&seed, &[b"x"], &[("x-amz-checksum-crc32", "AAAAAA==")]);
    let (_, err) = drain(auth::decode_body(&v, body_of(&body, 64))).await;
    assert_eq!(err.unwrap().code(), "MalformedTrailerError");
}

#[tokio::test]
async fn sigv4_signed_trailer_round_trip() {
    let (v, seed) = signed_verified(
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
        Some(6),
        Some("x-amz-checksum-crc64nvme"),
    );
    assert_eq!(v.body, BodyMode::ChunkedSigned { trailer: true });
    assert_eq!(v.declared_trailers(), ["x-amz-checksum-crc64nvme"]);
    // CRC-64/NVME of "abcdef".
    let body = encode_signed(
        &seed,
        &[b"abc", b"def"],
        &[("x-amz-checksum-crc64nvme", "Pact6XRTYyA=")],
    );
    let (decoded, trailers) = auth::decode_body_with_trailers(&v, body_of(&body, 5));
    let (frames, err) = drain(decoded).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(concat(&frames), b"abcdef");
    let t = trailers.take().unwrap();
    assert_eq!(t["x-amz-checksum-crc64nvme"], "Pact6XRTYyA=");
    assert!(trailers.take().is_none());

    // The trailer value changed in flight.
    let tampered = String::from_utf8(body.clone())
        .unwrap()
        .replace("Pact6XRTYyA=", "Pact6XRTYyB=");
    let (decoded, trailers) = auth::decode_body_with_trailers(&v, body_of(tampered.as_bytes(), 5));
    let (_, err) = drain(decoded).await;
    assert_eq!(err.unwrap().code(), "SignatureDoesNotMatch");
    assert!(trailers.take().is_none());

    // The declared trailer missing (another one sent, signed).
    let body = encode_signed(
        &seed,
        &[b"abc", b"def"],
        &[("x-amz-checksum-crc32", "AAAAAA==")],
    );
    let (_, err) = drain(auth::decode_body(&v, body_of(&body, 5))).await;
    assert_eq!(err.unwrap().code(), "MalformedTrailerError");
}

#[tokio::test]
async fn unsigned_trailer_round_trip() {
    let (v, _) = signed_verified(
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        Some(7),
        Some("x-amz-checksum-crc32c"),
    );
    assert_eq!(v.body, BodyMode::ChunkedUnsigned);
    // CRC-32C of "abcdefg".
    let body = b"3\r\nabc\r\n4\r\ndefg\r\n0\r\nx-amz-checksum-crc32c:5if0QQ==\r\n\r\n";
    let (decoded, trailers) = auth::decode_body_with_trailers(&v, body_of(body, 4));
    let (frames, err) = drain(decoded).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(concat(&frames), b"abcdefg");
    assert_eq!(
        trailers.take().unwrap()["x-amz-checksum-crc32c"],
        "5if0QQ=="
    );
    // Without the declared trailer.
    let (_, err) = drain(auth::decode_body(
        &v,
        body_of(b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n", 4),
    ))
    .await;
    assert_eq!(err.unwrap().code(), "MalformedTrailerError");
    // Truncated inside a chunk.
    let (_, err) = drain(auth::decode_body(&v, body_of(b"3\r\nabc\r\n4\r\nde", 4))).await;
    assert_eq!(err.unwrap().code(), "IncompleteBody");
}

// --- Trailing checksums ------------------------------------------------------

const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::Crc64Nvme,
    Algorithm::Crc32,
    Algorithm::Crc32c,
    Algorithm::Sha1,
    Algorithm::Sha256,
];

fn checksum_of(a: Algorithm, data: &[u8]) -> String {
    let mut h = Hasher::new(a);
    h.update(data);
    h.finish()
}

/// A STREAMING-UNSIGNED-PAYLOAD-TRAILER encoding of `data` in `chunk`-byte
/// chunks with the trailer `name:value`.
fn encode_unsigned(data: &[u8], chunk: usize, name: &str, value: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in data.chunks(chunk) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("0\r\n{name}:{value}\r\n\r\n").as_bytes());
    out
}

#[tokio::test]
async fn unsigned_trailing_checksum_is_verified() {
    let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    for a in ALGORITHMS {
        let (v, _) = signed_verified(
            "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
            Some(data.len() as u64),
            Some(a.header()),
        );
        let good = checksum_of(a, &data);
        for step in [7, 1000, 1 << 20] {
            let body = encode_unsigned(&data, 8192, a.header(), &good);
            let (decoded, trailers) = auth::decode_body_with_trailers(&v, body_of(&body, step));
            let (frames, err) = drain(decoded).await;
            assert!(err.is_none(), "{a:?} step {step}: {err:?}");
            assert_eq!(concat(&frames), data, "{a:?} step {step}");
            assert_eq!(trailers.take().unwrap()[a.header()], good.as_str());

            // A wrong value (another body's): BadDigest, and the last chunk
            // never comes out.
            let wrong = checksum_of(a, b"another body");
            let body = encode_unsigned(&data, 8192, a.header(), &wrong);
            let (decoded, trailers) = auth::decode_body_with_trailers(&v, body_of(&body, step));
            let (frames, err) = drain(decoded).await;
            let err = err.expect("an error item");
            assert_eq!(
                (err.code(), err.status().as_u16()),
                ("BadDigest", 400),
                "{a:?} step {step}"
            );
            let last = data.len() - data.len() / 8192 * 8192;
            assert_eq!(
                concat(&frames),
                data[..data.len() - last],
                "{a:?} step {step}"
            );
            assert!(trailers.take().is_none());
        }
    }

    // The body's bytes changed in flight, the checksum left as it was.
    let (v, _) = signed_verified(
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        Some(7),
        Some("x-amz-checksum-crc32"),
    );
    let body = encode_unsigned(
        b"abcdeXg",
        3,
        "x-amz-checksum-crc32",
        &checksum_of(Algorithm::Crc32, b"abcdefg"),
    );
    let (frames, err) = drain(auth::decode_body(&v, body_of(&body, 4))).await;
    assert_eq!(err.unwrap().code(), "BadDigest");
    assert_eq!(
        concat(&frames),
        b"abcdeX",
        "only chunks followed by another"
    );

    // A single chunk is held whole; the empty body has a checksum too.
    let body = encode_unsigned(b"abcdefg", 64, "x-amz-checksum-crc32", "AAAAAA==");
    let (frames, err) = drain(auth::decode_body(&v, body_of(&body, 1))).await;
    assert_eq!(err.unwrap().code(), "BadDigest");
    assert!(frames.is_empty());
    let (v, _) = signed_verified(
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        Some(0),
        Some("x-amz-checksum-crc32"),
    );
    let (frames, err) = drain(auth::decode_body(
        &v,
        body_of(b"0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", 5),
    ))
    .await;
    assert!(err.is_none() && frames.is_empty(), "{err:?}");
}

#[tokio::test]
async fn signed_trailing_checksum_is_verified() {
    for a in ALGORITHMS {
        let (v, seed) = signed_verified(
            "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
            Some(11),
            Some(a.header()),
        );
        let pieces: [&[u8]; 3] = [b"hello", b" ", b"world"];
        let good = checksum_of(a, b"hello world");
        let body = encode_signed(&seed, &pieces, &[(a.header(), &good)]);
        let (frames, err) = drain(auth::decode_body(&v, body_of(&body, 3))).await;
        assert!(err.is_none(), "{a:?}: {err:?}");
        assert_eq!(concat(&frames), b"hello world");

        // A wrong checksum, properly signed: the signatures check out, the
        // checksum does not.
        let wrong = checksum_of(a, b"hello world!");
        let body = encode_signed(&seed, &pieces, &[(a.header(), &wrong)]);
        let (decoded, trailers) = auth::decode_body_with_trailers(&v, body_of(&body, 3));
        let (frames, err) = drain(decoded).await;
        assert_eq!(err.unwrap().code(), "BadDigest", "{a:?}");
        assert_eq!(concat(&frames), b"hello ", "{a:?}: the last chunk is held");
        assert!(trailers.take().is_none());
    }
}

/// Each chunk comes out only once the next chunk header has arrived; the
/// last one once the trailer has checked out.
#[tokio::test]
async fn chunks_are_released_one_header_late() {
    use futures::FutureExt;

    let (v, _) = signed_verified(
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        Some(7),
        Some("x-amz-checksum-crc32c"),
    );
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
    let input = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|f| (f, rx))
    }));
    let mut decoded = auth::decode_body(&v, input);
    let send = |s: &'static [u8]| tx.send(Ok(Bytes::from_static(s))).unwrap();
    let mut next = || {
        decoded
            .frame()
            .now_or_never()
            .map(|f| f.map(|f| f.unwrap().into_data().unwrap()))
    };

    send(b"3\r\nabc\r\n");
    assert_eq!(next(), None, "held until the next header");
    send(b"4\r");
    assert_eq!(next(), None);
    send(b"\n");
    assert_eq!(next(), Some(Some(Bytes::from_static(b"abc"))));
    send(b"defg\r\n0\r\n");
    assert_eq!(next(), None, "the last chunk waits for the trailer");
    send(b"x-amz-checksum-crc32c:5if0QQ==\r\n\r\n");
    assert_eq!(next(), None, "and for the end of the body");
    drop(tx);
    assert_eq!(next(), Some(Some(Bytes::from_static(b"defg"))));
    assert_eq!(next(), Some(None));
}

// --- Plain bodies -------------------------------------------------------------

#[tokio::test]
async fn sha256_body_is_checked_at_the_end() {
    // The AWS "PUT Object" single-chunk example's payload.
    let hash = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
    let mut req = Request::builder()
        .method("PUT")
        .uri("http://h/b/k")
        .body(Body::empty())
        .unwrap();
    upstream::sign_request(&mut req, AK, SK, "us-east-1", hash, at(NOW)).unwrap();
    let v = auth::verify(&req.into_parts().0, &creds(), &settings(), at(NOW)).unwrap();
    assert_eq!(v.body, BodyMode::Sha256(hash.into()));

    let (frames, err) = drain(auth::decode_body(&v, body_of(b"Welcome to Amazon S3.", 4))).await;
    assert!(err.is_none());
    assert_eq!(concat(&frames), b"Welcome to Amazon S3.");

    // A wrong body: the error comes instead of the last frame.
    let (frames, err) = drain(auth::decode_body(&v, body_of(b"Welcome to Amazon S4.", 11))).await;
    assert_eq!(err.unwrap().code(), "XAmzContentSHA256Mismatch");
    assert_eq!(concat(&frames), b"Welcome to ");
    let (frames, err) = drain(auth::decode_body(&v, body_of(b"Welcome", 100))).await;
    assert_eq!(err.unwrap().code(), "XAmzContentSHA256Mismatch");
    assert!(frames.is_empty());

    // The empty body's hash (a GET) with an empty body, and with a body.
    let mut req = Request::builder()
        .uri("http://h/b/k")
        .body(Body::empty())
        .unwrap();
    let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    upstream::sign_request(&mut req, AK, SK, "us-east-1", empty, at(NOW)).unwrap();
    let v = auth::verify(&req.into_parts().0, &creds(), &settings(), at(NOW)).unwrap();
    let (frames, err) = drain(auth::decode_body(&v, Body::empty())).await;
    assert!(err.is_none() && frames.is_empty());
    let (_, err) = drain(auth::decode_body(&v, body_of(b"x", 1))).await;
    assert_eq!(err.unwrap().code(), "XAmzContentSHA256Mismatch");

    // A hash that is not one (set by hand): an error, not a panic.
    let mut bad = v.clone();
    bad.body = BodyMode::Sha256("zz".into());
    let (_, err) = drain(auth::decode_body(&bad, Body::empty())).await;
    assert_eq!(err.unwrap().code(), "XAmzContentSHA256Mismatch");
}

#[tokio::test]
async fn unsigned_body_passes_through() {
    let mut req = Request::builder()
        .uri("http://h/b/k")
        .body(Body::empty())
        .unwrap();
    upstream::sign_request(&mut req, AK, SK, "us-east-1", "UNSIGNED-PAYLOAD", at(NOW)).unwrap();
    let (mut p, _) = req.into_parts();
    p.headers
        .insert("x-amz-meta-late", HeaderValue::from_static("x"));
    assert_eq!(
        auth::verify(&p, &creds(), &settings(), at(NOW))
            .unwrap_err()
            .code(),
        "AccessDenied"
    );
    p.headers.remove("x-amz-meta-late");
    let v = auth::verify(&p, &creds(), &settings(), at(NOW)).unwrap();
    let (frames, err) = drain(auth::decode_body(&v, body_of(b"anything", 3))).await;
    assert!(err.is_none());
    assert_eq!(concat(&frames), b"anything");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// No encoded body makes the decoder panic, signed or not.
    #[test]
    fn decoder_never_panics(body in proptest::collection::vec(any::<u8>(), 0..512), step in 1usize..64, signed in any::<bool>()) {
        let v = if signed {
            example_verified()
        } else {
            signed_verified("STREAMING-UNSIGNED-PAYLOAD-TRAILER", None, None).0
        };
        let _ = futures::executor::block_on(drain(auth::decode_body(&v, body_of(&body, step))));
    }

    /// Plausible-looking chunked bodies, too.
    #[test]
    fn decoder_never_panics_on_chunk_like_input(lines in proptest::collection::vec("([0-9a-f]{1,8}(;chunk-signature=[0-9a-f]{0,66})?|[a-z-]{1,20}:[ -~]{0,20}|)", 0..8), step in 1usize..64) {
        let body = lines.join("\r\n");
        let v = example_verified();
        let _ = futures::executor::block_on(drain(auth::decode_body(&v, body_of(body.as_bytes(), step))));
        let u = signed_verified("STREAMING-UNSIGNED-PAYLOAD-TRAILER", None, None).0;
        let _ = futures::executor::block_on(drain(auth::decode_body(&u, body_of(body.as_bytes(), step))));
    }
}
