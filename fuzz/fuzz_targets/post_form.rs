//! A browser upload's form fields and its POST policy: arbitrary fields
//! (refused without a signature), and arbitrary policy JSON signed with
//! the right key so that the policy parser and its conditions are reached.
//! No panic; an unsigned or wrongly signed form never passes.
#![no_main]

use base64::Engine as _;
use hipobj_gateway::auth::post_form::{self, FormFields};
use hipobj_gateway_fuzz as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let v = f::fields(rest, 8);
    let mut fields = FormFields::new();
    if sel & 1 == 0 {
        // Raw fields: `name=value` lines.
        for line in &v {
            let (k, val) = line.split_once('=').unwrap_or((line.as_str(), ""));
            fields.push(k, val.to_string());
        }
        let r = post_form::check(&fields, "bucket", &f::creds(), &f::settings(), f::now());
        assert!(r.is_err() || fields.get("x-amz-signature").is_some() || fields.get("signature").is_some());
        return;
    }
    // A signed form whose policy is the fuzz input.
    let policy_json = v.first().cloned().unwrap_or_default();
    let policy = base64::engine::general_purpose::STANDARD.encode(policy_json.as_bytes());
    let date = "20260101T000000Z";
    let credential = format!("{}/20260101/us-east-1/s3/aws4_request", f::AK);
    let key = aws_sigv4::sign::v4::generate_signing_key(f::SK, f::now(), "us-east-1", "s3");
    let signature = aws_sigv4::sign::v4::calculate_signature(key.as_ref(), policy.as_bytes());
    fields.push("key", v.get(1).cloned().unwrap_or_default());
    for line in v.iter().skip(2) {
        let (k, val) = line.split_once('=').unwrap_or((line.as_str(), ""));
        fields.push(k, val.to_string());
    }
    fields.push("x-amz-algorithm", "AWS4-HMAC-SHA256".into());
    fields.push("x-amz-credential", credential);
    fields.push("x-amz-date", date.into());
    fields.push("policy", policy);
    fields.push("x-amz-signature", signature);
    let _ = post_form::check(&fields, "bucket", &f::creds(), &f::settings(), f::now());
});
