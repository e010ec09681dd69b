//! `hipobj-gateway` in front of a real MinIO (testcontainers' MinIO module):
//! the gateway's end-to-end checks against the store its users run. Plain
//! signed requests are proxied and land in MinIO; GET, ranged GET, PUT and
//! UploadPart by RDMA through the client library on the software provider
//! are byte-exact, checked against MinIO directly.
//!
//! Skipped (and passing) where no Docker engine answers; `REQUIRE_DOCKER=1`
//! makes that a failure.

#![forbid(unsafe_code)]

use hipobj_e2e::*;
use http::Method;

#[test]
fn plain_signed_put_and_get_through_the_gateway_land_in_minio() {
    let Some(minio) = minio_or_skip("plain_signed_put_and_get_through_the_gateway_land_in_minio")
    else {
        return;
    };
    let gw = Gateway::start(&minio);
    let s3 = gw.client();
    let direct = minio.direct();

    let b = bucket_name("plain");
    s3.create_bucket(&b);
    let data = pattern(1, 1 << 20);
    let put = s3.put_plain(&format!("/{b}/obj"), data.clone());
    assert_eq!(put.status, 200, "PUT: {}", put.text());
    assert!(put.header("etag").is_some(), "PUT answers an ETag");

    // Through the gateway, and in MinIO itself.
    assert_object(&s3, &format!("/{b}/obj"), &data);
    assert_object(&direct, &format!("/{b}/obj"), &data);

    // What MinIO stored comes back through the gateway too.
    let other = pattern(2, 4097);
    assert_eq!(
        direct
            .put_plain(&format!("/{b}/from-minio"), other.clone())
            .status,
        200
    );
    assert_object(&s3, &format!("/{b}/from-minio"), &other);

    // A plain ranged GET, HEAD and a listing are proxied.
    let r = s3.send(
        Method::GET,
        &format!("/{b}/obj"),
        &[("range", "bytes=100-199")],
        Vec::new(),
        false,
    );
    assert_eq!(r.status, 206, "{}", r.text());
    assert!(r.body[..] == data[100..200]);
    let head = s3.send(Method::HEAD, &format!("/{b}/obj"), &[], Vec::new(), false);
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length").as_deref(),
        Some("1048576"),
        "HEAD"
    );
    let list = s3.send(
        Method::GET,
        &format!("/{b}?list-type=2"),
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(list.status, 200, "{}", list.text());
    assert!(list.text().contains("<Key>obj</Key>"), "{}", list.text());

    // A missing key is MinIO's 404, carried through.
    let missing = s3.get_plain(&format!("/{b}/missing"));
    assert_eq!(missing.status, 404, "{}", missing.text());
    assert_eq!(
        xml_field(&missing.body, "Code").as_deref(),
        Some("NoSuchKey")
    );

    // Clients sign for the gateway, not for MinIO: MinIO's keys are refused.
    let wrong = S3::with_keys(&gw.url, MINIO_USER, MINIO_PASSWORD);
    assert_eq!(wrong.get_plain(&format!("/{b}/obj")).status, 403);
}

#[test]
fn rdma_put_and_get_byte_exact_against_minio() {
    let Some(minio) = minio_or_skip("rdma_put_and_get_byte_exact_against_minio") else {
        return;
    };
    let gw = Gateway::start(&minio);
    let s3 = gw.client();
    let direct = minio.direct();
    let b = bucket_name("rdma");
    s3.create_bucket(&b);
    let lib = client();

    // 1 byte, a page, and one byte past the 8 MiB staging chunk.
    for (i, len) in [1usize, 4096, (8 << 20) + 1].into_iter().enumerate() {
        let path = format!("/{b}/obj{i}");
        // PUT by RDMA READ from the client's buffer into MinIO.
        let data = pattern(10 + i as u64, len);
        let mut mem = data.clone();
        {
            let buf = lib.register_host(&mut mem).unwrap();
            let mut ops = RdmaOps::new(&s3, Method::PUT, &path);
            buf.put(0, len, &mut ops)
                .unwrap_or_else(|e| panic!("RDMA PUT of {len} bytes: {e:?}"));
            let last = ops.last();
            assert_eq!(last.reply().as_deref(), Some("200"), "{}", last.text());
            assert!(last.header("etag").is_some());
        }
        assert_object(&direct, &path, &data);

        // GET by RDMA WRITE from MinIO into a fresh buffer.
        let mut back = vec![0u8; len];
        {
            let buf = lib.register_host(&mut back).unwrap();
            let mut ops = RdmaOps::new(&s3, Method::GET, &path);
            buf.get(0, len, &mut ops)
                .unwrap_or_else(|e| panic!("RDMA GET of {len} bytes: {e:?}"));
            let last = ops.last();
            assert_eq!(last.status, 200, "{}", last.text());
            assert_eq!(
                last.header("x-amz-rdma-bytes-transferred"),
                Some(len.to_string())
            );
            assert!(
                last.body.is_empty(),
                "the bytes came by RDMA, not in the body"
            );
        }
        assert!(back == data, "RDMA GET of {len} bytes");
    }

    // A ranged GET by RDMA of an object MinIO stored.
    let data = pattern(9, 10_000);
    assert_eq!(
        direct.put_plain(&format!("/{b}/r"), data.clone()).status,
        200
    );
    let mut mem = vec![0u8; 100];
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut ops = RdmaOps::new(&s3, Method::GET, &format!("/{b}/r"))
            .with_header("range", "bytes=1000-1099");
        buf.get(0, 100, &mut ops).unwrap();
        let last = ops.last();
        assert_eq!(last.status, 206, "{}", last.text());
        assert_eq!(last.reply().as_deref(), Some("206"));
        assert_eq!(
            last.header("x-amz-rdma-bytes-transferred").as_deref(),
            Some("100")
        );
    }
    assert_eq!(&mem[..], &data[1000..1100]);
}

#[test]
fn multipart_upload_by_rdma_into_minio() {
    let Some(minio) = minio_or_skip("multipart_upload_by_rdma_into_minio") else {
        return;
    };
    let gw = Gateway::start(&minio);
    let s3 = gw.client();
    let direct = minio.direct();
    let b = bucket_name("multipart");
    s3.create_bucket(&b);
    let lib = client();

    // MinIO wants every part but the last to be at least 5 MiB.
    let part = 5usize << 20;
    let data = pattern(3, part * 2 + 123);
    let created = s3.send(
        Method::POST,
        &format!("/{b}/big?uploads"),
        &[],
        Vec::new(),
        false,
    );
    assert_eq!(created.status, 200, "{}", created.text());
    let upload_id = xml_field(&created.body, "UploadId").expect("an UploadId");
    let mut mem = data.clone();
    let mut etags = Vec::new();
    {
        let buf = lib.register_host(&mut mem).unwrap();
        let mut off = 0;
        while off < data.len() {
            let len = part.min(data.len() - off);
            let n = etags.len() + 1;
            let mut ops = RdmaOps::new(
                &s3,
                Method::PUT,
                &format!("/{b}/big?partNumber={n}&uploadId={upload_id}"),
            );
            buf.put(off as u64, len, &mut ops)
                .unwrap_or_else(|e| panic!("UploadPart {n} by RDMA: {e:?}"));
            etags.push(ops.last().header("etag").expect("a part's ETag"));
            off += len;
        }
    }
    let parts: String = etags
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{e}</ETag></Part>",
                i + 1
            )
        })
        .collect();
    let body = format!("<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>").into_bytes();
    let done = s3.send(
        Method::POST,
        &format!("/{b}/big?uploadId={upload_id}"),
        &[],
        body,
        false,
    );
    assert_eq!(done.status, 200, "{}", done.text());
    assert_object(&direct, &format!("/{b}/big"), &data);
    assert_object(&s3, &format!("/{b}/big"), &data);
}
