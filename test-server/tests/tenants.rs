//! Several tenants: the test server started with a credentials file of two
//! key pairs (`--credentials-file`) serves each tenant's signed requests and
//! the default pair's, refuses a wrong secret and an unknown key with 403,
//! and refuses to start on a malformed file, naming the line and not the
//! secret.

use std::path::Path;
use std::process::Command;

use hipobj_testkit::{
    assert_error, assert_object, test_server_with_tenants, CredentialsFile, Ready, ServerProc,
    Tenant, S3,
};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_hipobj-test-server"))
}

#[test]
fn each_tenant_signs_with_its_own_secret() {
    let a = Tenant::named("tenant-a");
    let b = Tenant::new("tenant-b", "another/secret+key");
    let server = test_server_with_tenants(bin(), &[a.clone(), b.clone()], &["0"]);
    for (t, bucket) in [(&a, "bucket-a"), (&b, "bucket-b")] {
        let s3 = t.s3(&server.url);
        s3.create_bucket(bucket);
        let data = format!("{} was here", t.access_key).into_bytes();
        let put = s3.put_plain(&format!("/{bucket}/obj"), data.clone());
        assert_eq!(put.status.as_u16(), 200, "{}: {}", t.access_key, put.text());
        assert_object(&s3, &format!("/{bucket}/obj"), &data);
    }
    // One store behind all of them: each reads what the other wrote.
    assert_object(&a.s3(&server.url), "/bucket-b/obj", b"tenant-b was here");
    // The pair of --access-key/--secret-key (the defaults) still signs.
    assert_object(&S3::new(&server.url), "/bucket-a/obj", b"tenant-a was here");
    // A tenant's key with another's secret, or a made-up one: 403.
    let wrong = Tenant::new(&a.access_key, &b.secret_key).s3(&server.url);
    assert_error(
        &wrong.get_plain("/bucket-a/obj"),
        403,
        "SignatureDoesNotMatch",
        None,
        "tenant-a with tenant-b's secret",
    );
    let unknown = Tenant::named("tenant-c").s3(&server.url);
    assert_error(
        &unknown.get_plain("/bucket-a/obj"),
        403,
        "InvalidAccessKeyId",
        None,
        "an access key not in the file",
    );
}

#[test]
fn a_malformed_file_stops_the_server_naming_the_line() {
    let file = CredentialsFile::with_text("# tenants\ntenant-a secret-a\ntenant-b\n");
    let mut cmd = Command::new(bin());
    cmd.args(["0", "--credentials-file", file.arg()]);
    let e = match ServerProc::try_start(cmd, Ready::Announced) {
        Ok(_) => panic!("started with a malformed credentials file"),
        Err(e) => e,
    };
    assert!(
        e.status.is_some_and(|s| !s.success()),
        "{:?}: {}",
        e.status,
        e.log
    );
    assert!(
        e.log.contains(&format!(
            "the credentials file {}, line 3: expected `ACCESS_KEY SECRET_KEY [buckets=...] [upstream=...]`, found 1 field(s)",
            file.arg()
        )),
        "{}",
        e.log
    );
    assert!(!e.log.contains("secret-a"), "{}", e.log);
}
