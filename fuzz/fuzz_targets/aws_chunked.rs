//! The aws-chunked decoder (signed, signed with a trailer, unsigned with a
//! trailing CRC32) on arbitrary bodies cut at arbitrary points: no panic,
//! never more bytes out than came in, and a signed body never gives out
//! data whose chunk signature is forged.
#![no_main]

use bytes::Bytes;
use hipobj_gateway::auth;
use hipobj_gateway::body::Body;
use hipobj_gateway_fuzz as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let Some((&step, body)) = rest.split_first() else { return };
    let mode = match sel % 3 {
        0 => f::Chunked::Signed,
        1 => f::Chunked::SignedTrailer,
        _ => f::Chunked::UnsignedTrailer,
    };
    let declared = u64::from(sel >> 2) * 1000;
    let verified = f::verified(mode, declared);
    let step = usize::from(step).max(1);
    let pieces: Vec<Result<Bytes, std::io::Error>> = body
        .chunks(step)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let incoming = Body::from_stream(futures::stream::iter(pieces));
    let (n, failed) = f::drain(auth::decode_body(&verified, incoming));
    assert!(n <= body.len());
    if matches!(mode, f::Chunked::Signed | f::Chunked::SignedTrailer) && !failed {
        // Only a body with forged signatures could get here with data.
        assert_eq!(n, 0, "a signed body with forged chunks was released");
    }
});
