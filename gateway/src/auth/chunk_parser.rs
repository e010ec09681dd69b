//! The aws-chunked decoder, sans I/O: bytes in, verified data out. It
//! checks each chunk signature in order (signed modes), the trailer
//! signature, the declared trailing headers and a declared trailing
//! checksum, and holds data back until it has verified. The body state
//! machine that feeds it the incoming frames is [`super::chunked`].
//!
//! The aws-chunked format:
//!
//! ```text
//! <hex size>;chunk-signature=<64 hex>\r\n<data>\r\n      (signed)
//! <hex size>[;ext]\r\n<data>\r\n                          (unsigned)
//! ...
//! 0;chunk-signature=<64 hex>\r\n  or  0\r\n
//! [<trailer>:<value>\r\n ...][x-amz-trailer-signature:<64 hex>\r\n]\r\n
//! ```

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use aws_sigv4::sign::v4::calculate_signature;

use super::canonical;
use super::{AuthError, ChainContext, Verified, MAX_CHUNK_SIZE};
use crate::checksum::{Algorithm, Hasher};
use hipobj_net::sigv4::EMPTY_SHA256;

/// The longest chunk-size line (size, extensions, CRLF) accepted.
const MAX_LINE: usize = 4096;
/// The most bytes of trailing headers accepted.
const MAX_TRAILER_BYTES: usize = 16 * 1024;
/// The most trailing headers accepted.
const MAX_TRAILERS: usize = 64;
const TRAILER_SIGNATURE: &str = "x-amz-trailer-signature";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`: chunk signatures, no trailer.
    Signed,
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`: chunk signatures and a
    /// signed trailer.
    SignedTrailer,
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: no signatures, a trailer.
    Unsigned,
}

impl Mode {
    fn signed(self) -> bool {
        self != Mode::Unsigned
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Reading a chunk-size line.
    Header,
    /// Reading chunk data.
    Data { remaining: u64 },
    /// Reading the CRLF after chunk data (`seen` bytes of it so far).
    DataEnd { seen: u8 },
    /// After the zero-size chunk: trailing header lines, blank lines.
    Trailers,
    /// Ended well (or failed).
    Done,
}

/// The sans-I/O aws-chunked decoder: bytes in, verified data out.
pub(crate) struct ChunkParser {
    mode: Mode,
    ctx: ChainContext,
    state: State,
    /// The line being read (chunk header or trailer).
    line: Vec<u8>,
    /// Signed modes, or with a trailing checksum: the current chunk's data,
    /// released once verified (or held, see `held`).
    chunk: BytesMut,
    /// The trailing checksums declared in `x-amz-trailer`, computed over
    /// the decoded bytes (trailer modes only; usually none or one).
    checksums: Vec<(Algorithm, Hasher)>,
    /// With a trailing checksum: the last complete chunk, released when the
    /// next chunk header has been read, or at the end once the checksum
    /// checked out.
    held: Option<Bytes>,
    hasher: Sha256,
    /// The current chunk's signature as sent.
    chunk_signature: [u8; 32],
    /// The previous signature in the chain (hex).
    prev_signature: String,
    decoded: u64,
    declared_length: Option<u64>,
    trailers: Vec<(String, String)>,
    trailer_bytes: usize,
    trailer_signature: Option<[u8; 32]>,
    /// What this body holds of the process's budget of buffered chunk
    /// bytes ([`super::chunk_budget`]).
    budget: super::chunk_budget::Held,
}

impl ChunkParser {
    /// The decoded length the request declared
    /// (`x-amz-decoded-content-length`), if it did.
    pub(crate) fn declared_length(&self) -> Option<u64> {
        self.declared_length
    }

    pub(crate) fn new(mode: Mode, verified: &Verified) -> ChunkParser {
        let mut p =
            ChunkParser::with_context(mode, verified.chain.clone(), verified.decoded_length);
        p.budget =
            super::chunk_budget::Held::new(super::chunk_budget::global(), &verified.access_key);
        p
    }

    fn with_context(mode: Mode, ctx: ChainContext, declared_length: Option<u64>) -> ChunkParser {
        let prev_signature = ctx.seed_signature.clone();
        let mut checksums: Vec<(Algorithm, Hasher)> = Vec::new();
        if mode != Mode::Signed {
            for a in ctx
                .declared_trailers
                .iter()
                .filter_map(|t| Algorithm::from_header(t))
            {
                if !checksums.iter().any(|(b, _)| *b == a) {
                    checksums.push((a, Hasher::new(a)));
                }
            }
        }
        ChunkParser {
            mode,
            ctx,
            state: State::Header,
            line: Vec::new(),
            chunk: BytesMut::new(),
            checksums,
            held: None,
            hasher: Sha256::new(),
            chunk_signature: [0; 32],
            prev_signature,
            decoded: 0,
            declared_length,
            trailers: Vec::new(),
            trailer_bytes: 0,
            trailer_signature: None,
            budget: super::chunk_budget::Held::new(super::chunk_budget::global(), ""),
        }
    }

    /// The bytes this body holds or has made room for: the chunk held back,
    /// the one being read and what remains of it.
    fn holding(&self) -> u64 {
        if !self.buffers() {
            return 0;
        }
        let remaining = match self.state {
            State::Data { remaining } => remaining,
            _ => 0,
        };
        (self.held.as_ref().map_or(0, Bytes::len) + self.chunk.len()) as u64 + remaining
    }

    /// Whether complete chunks are held back for a trailing checksum.
    fn holds_back(&self) -> bool {
        !self.checksums.is_empty()
    }

    /// Whether chunk data is collected rather than passed through.
    fn buffers(&self) -> bool {
        self.mode.signed() || self.holds_back()
    }

    /// Feeds the next bytes of the encoded body; decoded, verified data is
    /// pushed to `out` (with a trailing checksum, one chunk late).
    pub(crate) fn push(
        &mut self,
        mut input: Bytes,
        out: &mut VecDeque<Bytes>,
    ) -> Result<(), AuthError> {
        let mut result = self.push_inner(&mut input, out);
        if result.is_err() {
            self.state = State::Done;
            self.held = None;
            self.chunk = BytesMut::new();
        }
        // What was released gives its share of the budget back.
        let holding = self.holding();
        if let Err(e) = self.budget.hold(holding) {
            result = result.and(Err(e));
        }
        result
    }

    fn push_inner(
        &mut self,
        input: &mut Bytes,
        out: &mut VecDeque<Bytes>,
    ) -> Result<(), AuthError> {
        while !input.is_empty() {
            match self.state {
                State::Header | State::Trailers => {
                    let limit = if self.state == State::Header {
                        MAX_LINE
                    } else {
                        MAX_TRAILER_BYTES
                    };
                    let Some(line) = self.take_line(input, limit)? else {
                        continue;
                    };
                    if self.state == State::Header {
                        self.header_line(&line, out)?;
                    } else {
                        self.trailer_line(&line)?;
                    }
                }
                State::Data { remaining } => {
                    let n = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(input.len());
                    let piece = input.split_to(n);
                    for (_, h) in &mut self.checksums {
                        h.update(&piece);
                    }
                    if self.buffers() {
                        if self.mode.signed() {
                            self.hasher.update(&piece);
                        }
                        self.chunk.extend_from_slice(&piece);
                    } else if !piece.is_empty() {
                        out.push_back(piece);
                    }
                    let left = remaining.saturating_sub(n as u64);
                    self.state = if left == 0 {
                        State::DataEnd { seen: 0 }
                    } else {
                        State::Data { remaining: left }
                    };
                }
                State::DataEnd { seen } => {
                    let expected = if seen == 0 { b'\r' } else { b'\n' };
                    let got = input.split_to(1);
                    if got.first() != Some(&expected) {
                        return Err(AuthError::InvalidRequest(
                            "aws-chunked: chunk data is not followed by CRLF".into(),
                        ));
                    }
                    if seen == 0 {
                        self.state = State::DataEnd { seen: 1 };
                    } else {
                        if self.mode.signed() {
                            let digest = std::mem::take(&mut self.hasher).finalize();
                            self.check_chunk(&hex::encode(digest))?;
                        }
                        if self.buffers() {
                            let data = self.chunk.split().freeze();
                            if self.holds_back() {
                                // The previous one went out with this
                                // chunk's header.
                                if let Some(prev) = self.held.replace(data) {
                                    out.push_back(prev);
                                }
                            } else {
                                out.push_back(data);
                            }
                        }
                        self.state = State::Header;
                    }
                }
                State::Done => {
                    return Err(AuthError::InvalidRequest(
                        "aws-chunked: data after the end of the body".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Moves bytes of `input` to the current line; returns the line without
    /// its CRLF once complete.
    fn take_line(&mut self, input: &mut Bytes, limit: usize) -> Result<Option<Vec<u8>>, AuthError> {
        let newline = input.iter().position(|&b| b == b'\n');
        let n = newline.map_or(input.len(), |i| i + 1);
        if self.line.len().saturating_add(n) > limit {
            return Err(AuthError::InvalidRequest(
                "aws-chunked: a chunk header or trailer is too long".into(),
            ));
        }
        self.line.extend_from_slice(&input.split_to(n));
        if newline.is_none() {
            return Ok(None);
        }
        let mut line = std::mem::take(&mut self.line);
        line.pop(); // '\n'
        if line.pop() != Some(b'\r') {
            return Err(AuthError::InvalidRequest(
                "aws-chunked: a line does not end with CRLF".into(),
            ));
        }
        Ok(Some(line))
    }

    /// `<hex size>;chunk-signature=<sig>` or `<hex size>[;ext]`. A chunk
    /// held back is released to `out` by the header of a further data chunk.
    fn header_line(&mut self, line: &[u8], out: &mut VecDeque<Bytes>) -> Result<(), AuthError> {
        let malformed = || AuthError::InvalidRequest("aws-chunked: malformed chunk header".into());
        let (size, ext) = match line.iter().position(|&b| b == b';') {
            Some(i) => (line.get(..i).unwrap_or_default(), line.get(i + 1..)),
            None => (line, None),
        };
        if size.is_empty() || size.len() > 16 || !size.iter().all(u8::is_ascii_hexdigit) {
            return Err(malformed());
        }
        let size = std::str::from_utf8(size)
            .ok()
            .and_then(|s| u64::from_str_radix(s, 16).ok())
            .ok_or_else(malformed)?;
        if size > MAX_CHUNK_SIZE {
            return Err(AuthError::InvalidRequest(format!(
                "aws-chunked: a chunk of {size} bytes exceeds the limit of {MAX_CHUNK_SIZE}"
            )));
        }
        if let Some(declared) = self.declared_length {
            if self.decoded.saturating_add(size) > declared {
                return Err(AuthError::IncompleteBody(
                    "aws-chunked: the body is longer than x-amz-decoded-content-length".into(),
                ));
            }
        }
        if self.mode.signed() {
            let sig = ext
                .and_then(|e| e.strip_prefix(b"chunk-signature="))
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(canonical::parse_hex32)
                .ok_or_else(|| {
                    AuthError::InvalidRequest(
                        "aws-chunked: a chunk has no valid chunk-signature".into(),
                    )
                })?;
            self.chunk_signature = sig;
        }
        self.decoded = self.decoded.saturating_add(size);
        if size == 0 {
            if self.mode.signed() {
                self.check_chunk(EMPTY_SHA256)?;
            }
            self.state = State::Trailers;
        } else {
            // More data follows: the chunk before it was not the last one.
            if let Some(prev) = self.held.take() {
                out.push_back(prev);
            }
            self.state = State::Data { remaining: size };
            if self.buffers() {
                // Room for the chunk is taken from the budget first.
                self.budget.hold(self.holding())?;
                self.chunk.reserve(usize::try_from(size).unwrap_or(0));
            }
        }
        Ok(())
    }

    /// Checks the current chunk's signature against its data's hash and
    /// advances the chain.
    fn check_chunk(&mut self, data_hash: &str) -> Result<(), AuthError> {
        let sts = format!(
            "AWS4-HMAC-SHA256-PAYLOAD\n{}\n{}\n{}\n{EMPTY_SHA256}\n{data_hash}",
            self.ctx.amz_date, self.ctx.scope, self.prev_signature
        );
        let computed = calculate_signature(&self.ctx.signing_key, sts.as_bytes());
        let ok = canonical::parse_hex32(&computed)
            .is_some_and(|c| bool::from(c.ct_eq(&self.chunk_signature)));
        if !ok {
            tracing::debug!(
                chunk_at = self.decoded,
                "aws-chunked: chunk signature does not match"
            );
            return Err(AuthError::ChunkSignatureDoesNotMatch("chunk"));
        }
        self.prev_signature = computed;
        Ok(())
    }

    /// A line after the zero-size chunk: blank, or `name:value`.
    fn trailer_line(&mut self, line: &[u8]) -> Result<(), AuthError> {
        if line.iter().all(|&b| b == b' ' || b == b'\t') {
            return Ok(());
        }
        if self.mode == Mode::Signed {
            return Err(AuthError::MalformedTrailer(
                "aws-chunked: trailing headers sent without a -TRAILER x-amz-content-sha256".into(),
            ));
        }
        let malformed =
            || AuthError::MalformedTrailer("aws-chunked: malformed trailing header".into());
        let line = std::str::from_utf8(line).map_err(|_| malformed())?;
        let (name, value) = line.split_once(':').ok_or_else(malformed)?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim_matches(|c| c == ' ' || c == '\t');
        if name.is_empty() {
            return Err(malformed());
        }
        self.trailer_bytes = self.trailer_bytes.saturating_add(line.len());
        if self.trailer_bytes > MAX_TRAILER_BYTES || self.trailers.len() >= MAX_TRAILERS {
            return Err(AuthError::MalformedTrailer(
                "aws-chunked: too many trailing headers".into(),
            ));
        }
        if name == TRAILER_SIGNATURE {
            if self.mode == Mode::SignedTrailer {
                let sig = canonical::parse_hex32(value).ok_or_else(malformed)?;
                if self.trailer_signature.replace(sig).is_some() {
                    return Err(malformed());
                }
            }
            // Unsigned mode: nothing to check it against; dropped.
            return Ok(());
        }
        if self.trailers.iter().any(|(n, _)| *n == name) {
            return Err(AuthError::MalformedTrailer(
                "aws-chunked: a trailing header is repeated".into(),
            ));
        }
        self.trailers.push((name, value.to_string()));
        Ok(())
    }

    /// The encoded body has ended: checks it ended where it may, its decoded
    /// length, the trailer signature, the declared trailers and the trailing
    /// checksum; if all is well, the chunk held back goes to `out`.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<Bytes>) -> Result<HeaderMap, AuthError> {
        let result = self.finish_inner();
        self.state = State::Done;
        self.chunk = BytesMut::new();
        if let Some(last) = self.held.take() {
            if result.is_ok() {
                out.push_back(last);
            }
        }
        result
    }

    fn finish_inner(&mut self) -> Result<HeaderMap, AuthError> {
        match self.state {
            State::Trailers => {}
            State::Done => {
                return Err(AuthError::InvalidRequest(
                    "aws-chunked: the body already failed".into(),
                ))
            }
            _ => {
                return Err(AuthError::IncompleteBody(
                    "aws-chunked: the body ended before its final zero-size chunk".into(),
                ))
            }
        }
        // A last trailing line without its CRLF is taken as complete.
        if !self.line.is_empty() {
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.trailer_line(&line)?;
        }
        if let Some(declared) = self.declared_length {
            if self.decoded != declared {
                return Err(AuthError::IncompleteBody(format!(
                    "aws-chunked: decoded {} bytes, x-amz-decoded-content-length says {declared}",
                    self.decoded
                )));
            }
        }
        if self.mode == Mode::SignedTrailer {
            let Some(sig) = self.trailer_signature else {
                return Err(AuthError::MalformedTrailer(
                    "aws-chunked: x-amz-trailer-signature is missing".into(),
                ));
            };
            let mut sorted: Vec<&(String, String)> = self.trailers.iter().collect();
            sorted.sort();
            let mut canonical_trailers = Vec::new();
            for (name, value) in sorted {
                canonical_trailers.extend_from_slice(name.as_bytes());
                canonical_trailers.push(b':');
                canonical_trailers.extend_from_slice(value.as_bytes());
                canonical_trailers.push(b'\n');
            }
            let sts = format!(
                "AWS4-HMAC-SHA256-TRAILER\n{}\n{}\n{}\n{}",
                self.ctx.amz_date,
                self.ctx.scope,
                self.prev_signature,
                canonical::sha256_hex(&canonical_trailers)
            );
            let computed = calculate_signature(&self.ctx.signing_key, sts.as_bytes());
            let ok = canonical::parse_hex32(&computed).is_some_and(|c| bool::from(c.ct_eq(&sig)));
            if !ok {
                tracing::debug!("aws-chunked: trailer signature does not match");
                return Err(AuthError::ChunkSignatureDoesNotMatch("trailer"));
            }
        }
        if let Some(missing) = self
            .ctx
            .declared_trailers
            .iter()
            .find(|d| !self.trailers.iter().any(|(n, _)| n == *d))
        {
            return Err(AuthError::MalformedTrailer(format!(
                "aws-chunked: the trailing header {missing} declared in x-amz-trailer was not sent"
            )));
        }
        for (algorithm, hasher) in std::mem::take(&mut self.checksums) {
            let header = algorithm.header();
            let sent = self
                .trailers
                .iter()
                .find(|(n, _)| n == header)
                .map(|(_, v)| v.as_str());
            let computed = hasher.finish();
            if sent != Some(computed.as_str()) {
                tracing::debug!(
                    trailer = header,
                    "aws-chunked: the trailing checksum does not match the body"
                );
                return Err(AuthError::BadDigest(algorithm.name()));
            }
        }
        let mut map = HeaderMap::with_capacity(self.trailers.len());
        for (name, value) in &self.trailers {
            let malformed = || {
                AuthError::MalformedTrailer(
                    "aws-chunked: a trailing header is not a valid header".into(),
                )
            };
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| malformed())?;
            let value = HeaderValue::from_str(value).map_err(|_| malformed())?;
            map.append(name, value);
        }
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    fn ctx(seed: &str) -> ChainContext {
        let t = canonical::parse_amz_date("20130524T000000Z").unwrap();
        let key = aws_sigv4::sign::v4::generate_signing_key(SECRET, t, "us-east-1", "s3");
        ChainContext {
            signing_key: key.as_ref().to_vec(),
            amz_date: "20130524T000000Z".into(),
            scope: "20130524/us-east-1/s3/aws4_request".into(),
            seed_signature: seed.into(),
            declared_trailers: vec!["x-amz-checksum-crc32c".into()],
        }
    }

    fn encode(parts: &[(&[u8], &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (data, sig) in parts {
            out.extend_from_slice(format!("{:x};chunk-signature={sig}\r\n", data.len()).as_bytes());
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// The AWS trailing-header example (sigv4-streaming-trailers), fed one
    /// byte at a time and all at once.
    #[test]
    fn aws_trailer_example() {
        let a64 = vec![b'a'; 65536];
        let a1 = vec![b'a'; 1024];
        let mut body = encode(&[
            (
                &a64,
                "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
            ),
            (
                &a1,
                "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
            ),
        ]);
        body.extend_from_slice(b"0;chunk-signature=2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992\r\n");
        body.extend_from_slice(b"x-amz-checksum-crc32c:sOO8/Q==\r\n");
        body.extend_from_slice(
            b"x-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n",
        );
        let seed = "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e";
        for step in [1usize, 7, 4096, body.len()] {
            let mut p = ChunkParser::with_context(Mode::SignedTrailer, ctx(seed), Some(66560));
            let mut out = VecDeque::new();
            for piece in body.chunks(step) {
                p.push(Bytes::copy_from_slice(piece), &mut out).unwrap();
            }
            // The last chunk is held until the trailing checksum is checked.
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].len(), 65536);
            let trailers = p.finish(&mut out).unwrap();
            let data: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
            assert_eq!(data.len(), 66560);
            assert!(data.iter().all(|&b| b == b'a'));
            assert_eq!(out.len(), 2, "one output per verified chunk");
            assert_eq!(trailers.get("x-amz-checksum-crc32c").unwrap(), "sOO8/Q==");
            assert!(trailers.get(TRAILER_SIGNATURE).is_none());
        }

        // A tampered trailer value fails the trailer signature.
        let tampered = String::from_utf8(body.clone())
            .unwrap()
            .replace("sOO8/Q==", "sOO8/Q=A");
        let mut p = ChunkParser::with_context(Mode::SignedTrailer, ctx(seed), Some(66560));
        let mut out = VecDeque::new();
        p.push(Bytes::from(tampered), &mut out).unwrap();
        let err = p.finish(&mut out).unwrap_err();
        assert_eq!(err.code(), "SignatureDoesNotMatch");
        assert_eq!(out.len(), 1, "the last chunk is not released");

        // The s3s layout: an empty line before the trailers, no final CRLF.
        let mut alt = encode(&[
            (
                &a64,
                "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
            ),
            (
                &a1,
                "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
            ),
        ]);
        alt.extend_from_slice(b"0;chunk-signature=2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992\r\n\r\n");
        alt.extend_from_slice(
            b"x-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435",
        );
        let mut p = ChunkParser::with_context(Mode::SignedTrailer, ctx(seed), Some(66560));
        let mut out = VecDeque::new();
        p.push(Bytes::from(alt), &mut out).unwrap();
        p.finish(&mut out).unwrap();
        assert_eq!(out.iter().map(Bytes::len).sum::<usize>(), 66560);

        // The trailer signature missing.
        let mut p = ChunkParser::with_context(Mode::SignedTrailer, ctx(seed), Some(66560));
        let cut = body.len() - b"x-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n".len();
        p.push(Bytes::copy_from_slice(&body[..cut]), &mut VecDeque::new())
            .unwrap();
        assert_eq!(
            p.finish(&mut VecDeque::new()).unwrap_err().code(),
            "MalformedTrailerError"
        );
    }

    #[test]
    fn unsigned_trailer() {
        let mut c = ctx("");
        c.declared_trailers = vec!["x-amz-checksum-crc64nvme".into()];
        // CRC-64/NVME of "abcdefg".
        let body =
            b"3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nx-amz-checksum-crc64nvme: SmzZ/LTp1CA=\r\n\r\n";
        let mut p = ChunkParser::with_context(Mode::Unsigned, c.clone(), Some(7));
        let mut out = VecDeque::new();
        for b in body.chunks(2) {
            p.push(Bytes::copy_from_slice(b), &mut out).unwrap();
        }
        assert_eq!(out, [Bytes::from_static(b"abc")], "the last chunk is held");
        let t = p.finish(&mut out).unwrap();
        let data: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(data, b"abcdefg");
        assert_eq!(t.get("x-amz-checksum-crc64nvme").unwrap(), "SmzZ/LTp1CA=");

        // A wrong checksum: BadDigest, and the last chunk never comes out.
        let wrong = String::from_utf8_lossy(body).replace("SmzZ/LTp1CA=", "AAAAAAAAAAA=");
        let mut p = ChunkParser::with_context(Mode::Unsigned, c.clone(), Some(7));
        let mut out = VecDeque::new();
        p.push(Bytes::from(wrong), &mut out).unwrap();
        let err = p.finish(&mut out).unwrap_err();
        assert_eq!((err.code(), err.status().as_u16()), ("BadDigest", 400));
        assert_eq!(out, [Bytes::from_static(b"abc")]);

        // No checksum declared: data passes through as it arrives.
        let mut plain = c.clone();
        plain.declared_trailers = vec!["x-amz-meta-foo".into()];
        let mut p = ChunkParser::with_context(Mode::Unsigned, plain, Some(7));
        let mut out = VecDeque::new();
        p.push(Bytes::from_static(b"3\r\nabc\r\n4\r\nde"), &mut out)
            .unwrap();
        assert_eq!(out, [Bytes::from_static(b"abc"), Bytes::from_static(b"de")]);

        // The declared trailer missing.
        let mut p = ChunkParser::with_context(Mode::Unsigned, c.clone(), Some(7));
        p.push(
            Bytes::from_static(b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"),
            &mut VecDeque::new(),
        )
        .unwrap();
        assert_eq!(
            p.finish(&mut VecDeque::new()).unwrap_err().code(),
            "MalformedTrailerError"
        );

        // Wrong decoded length, both ways.
        let mut p = ChunkParser::with_context(Mode::Unsigned, c.clone(), Some(8));
        p.push(
            Bytes::from_static(b"3\r\nabc\r\n4\r\ndefg\r\n0\r\nx-amz-checksum-crc64nvme:x\r\n\r\n"),
            &mut VecDeque::new(),
        )
        .unwrap();
        assert_eq!(
            p.finish(&mut VecDeque::new()).unwrap_err().code(),
            "IncompleteBody"
        );
        let mut p = ChunkParser::with_context(Mode::Unsigned, c, Some(6));
        let err = p
            .push(
                Bytes::from_static(b"3\r\nabc\r\n4\r\ndefg\r\n"),
                &mut VecDeque::new(),
            )
            .unwrap_err();
        assert_eq!(err.code(), "IncompleteBody");
    }

    #[test]
    fn malformed_inputs_are_errors() {
        let cases: &[&[u8]] = &[
            b"zz\r\n",
            b"\r\n",
            b"11111111111111111\r\n",
            b"1000001\r\nx",
            b"3\r\nabcX",
            b"3\nabc\r\n",
            b"3\r\nabc\r\n0\r\nnocolon\r\n",
            b"3\r\nabc\r\n0\r\n:v\r\n",
        ];
        for case in cases {
            let mut p = ChunkParser::with_context(Mode::Unsigned, ctx(""), None);
            let r = p
                .push(Bytes::from_static(case), &mut VecDeque::new())
                .and_then(|()| p.finish(&mut VecDeque::new()).map(|_| ()));
            assert!(r.is_err(), "{:?}", String::from_utf8_lossy(case));
        }
        let mut p = ChunkParser::with_context(Mode::Unsigned, ctx(""), None);
        let long = vec![b'1'; MAX_LINE + 1];
        assert!(p.push(Bytes::from(long), &mut VecDeque::new()).is_err());
        // Signed mode needs a chunk-signature.
        let mut p = ChunkParser::with_context(Mode::Signed, ctx(&"0".repeat(64)), None);
        assert!(p
            .push(Bytes::from_static(b"3\r\n"), &mut VecDeque::new())
            .is_err());
    }
}
