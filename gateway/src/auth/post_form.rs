//! Verification of a browser-based upload's form (POST Object): its
//! signature (the SigV4 form, `x-amz-signature` over the base64 policy
//! with the SigV4 signing key, or the SigV2 form, `signature` = base64
//! HMAC-SHA1 of it) and its policy document (expiration, conditions, no
//! field left uncovered).
//!
//! The policy is parsed with s3s's [`PostPolicy`]; every check and every
//! error is S3's: a refused form answers 403 `AccessDenied` "Invalid
//! according to Policy: ..." (expired, a condition failed, an extra
//! field), 403 `InvalidAccessKeyId` / `SignatureDoesNotMatch`, 400
//! `InvalidPolicyDocument` or `InvalidArgument` for a malformed form. The
//! `content-length-range` is returned, to be enforced while the file
//! streams.

use std::time::SystemTime;

use aws_sigv4::sign::v4::{calculate_signature, generate_signing_key};
use http::StatusCode;
use s3s::post_policy::{PostPolicy, PostPolicyCondition};
use subtle::ConstantTimeEq;

use super::canonical::{self, ALGORITHM, SERVICE, TERMINATOR};
use super::{sigv2, AuthSettings, Credentials};
use crate::s3err::S3Error;

/// The fields of a form that precede its `file` part, names lowercase (S3
/// matches them case-insensitively), values as sent, in order.
#[derive(Clone, Debug, Default)]
pub struct FormFields {
    fields: Vec<(String, String)>,
}

impl FormFields {
    /// No fields.
    pub fn new() -> FormFields {
        FormFields::default()
    }

    /// Adds a field; `name` is lowercased.
    pub fn push(&mut self, name: &str, value: String) {
        self.fields.push((name.to_ascii_lowercase(), value));
    }

    /// The first value of field `name` (lowercase).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every field, names lowercase.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// A form whose signature and policy checked out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormGrant {
    /// The access key that signed it.
    pub access_key: String,
    /// The file's size range (inclusive) from `content-length-range`, if
    /// the policy has one; the tightest when it has several.
    pub length_range: Option<(u64, u64)>,
}

/// Fields no policy condition needs to cover (S3: the signature, the
/// policy, the file, `x-ignore-*`).
fn exempt(name: &str) -> bool {
    matches!(
        name,
        "x-amz-signature" | "signature" | "awsaccesskeyid" | "policy" | "file"
    ) || name.starts_with("x-ignore-")
}

fn access_denied(msg: impl Into<String>) -> S3Error {
    S3Error::new(StatusCode::FORBIDDEN, "AccessDenied", msg)
}

fn invalid_argument(msg: impl Into<String>) -> S3Error {
    S3Error::new(StatusCode::BAD_REQUEST, "InvalidArgument", msg)
}

fn missing(field: &str) -> S3Error {
    invalid_argument(format!(
        "Bucket POST must contain a field named '{field}'.  If it is specified, please check the order of the fields."
    ))
}

fn from_auth(e: &super::AuthError) -> S3Error {
    S3Error::new(e.status(), e.code(), e.to_string())
}

/// Checks the form of an upload to `bucket`: its signature (SigV4 or SigV2
/// form), then its policy at `now`. A form without any signature is
/// anonymous, which this front never serves (403 `AccessDenied`).
pub fn check(
    fields: &FormFields,
    bucket: &str,
    creds: &Credentials,
    settings: &AuthSettings,
    now: SystemTime,
) -> Result<FormGrant, S3Error> {
    let access_key = if fields.get("x-amz-signature").is_some() {
        check_v4(fields, creds, settings)?
    } else if fields.get("signature").is_some() || fields.get("awsaccesskeyid").is_some() {
        check_v2(fields, creds)?
    } else if fields.get("x-amz-algorithm").is_some() || fields.get("x-amz-credential").is_some() {
        return Err(missing("x-amz-signature"));
    } else {
        return Err(access_denied(
            "the form is not signed (anonymous access is not allowed)",
        ));
    };
    let policy = fields.get("policy").ok_or_else(|| missing("policy"))?;
    let length_range = check_policy(policy, fields, bucket, now)?;
    Ok(FormGrant {
        access_key,
        length_range,
    })
}

/// The SigV4 form: `x-amz-algorithm`, `x-amz-credential`, `x-amz-date`,
/// `x-amz-signature` (hex HMAC-SHA256 of the base64 policy with the
/// signing key of the credential's date, region and `s3`).
fn check_v4(
    fields: &FormFields,
    creds: &Credentials,
    settings: &AuthSettings,
) -> Result<String, S3Error> {
    let algorithm = fields
        .get("x-amz-algorithm")
        .ok_or_else(|| missing("x-amz-algorithm"))?;
    if algorithm != ALGORITHM {
        return Err(invalid_argument(
            "x-amz-algorithm only supports \"AWS4-HMAC-SHA256\"",
        ));
    }
    let credential = fields
        .get("x-amz-credential")
        .ok_or_else(|| missing("x-amz-credential"))?;
    let amz_date = fields
        .get("x-amz-date")
        .ok_or_else(|| missing("x-amz-date"))?;
    let signature = fields
        .get("x-amz-signature")
        .ok_or_else(|| missing("x-amz-signature"))?;
    let policy = fields.get("policy").ok_or_else(|| missing("policy"))?;

    let bad_credential = || {
        invalid_argument(
            "x-amz-credential must be <access key>/<yyyymmdd>/<region>/s3/aws4_request",
        )
    };
    let parts: Vec<&str> = credential.split('/').collect();
    let [access_key, date, region, service, terminator] = parts.as_slice() else {
        return Err(bad_credential());
    };
    if access_key.is_empty()
        || canonical::parse_date(date).is_none()
        || *service != SERVICE
        || *terminator != TERMINATOR
    {
        return Err(bad_credential());
    }
    if *region != settings.region {
        return Err(S3Error::new(
            StatusCode::BAD_REQUEST,
            "AuthorizationQueryParametersError",
            format!(
                "the region in x-amz-credential is wrong; expecting '{}'",
                settings.region
            ),
        ));
    }
    if canonical::parse_amz_date(amz_date).is_none() {
        return Err(invalid_argument(
            "x-amz-date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"",
        ));
    }
    let secret = creds
        .secret(access_key)
        .ok_or_else(|| from_auth(&super::AuthError::InvalidAccessKeyId))?;
    // The signing key is of the credential's date (midnight of it).
    let key_time =
        canonical::parse_amz_date(&format!("{date}T000000Z")).ok_or_else(bad_credential)?;
    let key = generate_signing_key(secret, key_time, region, SERVICE);
    let computed = calculate_signature(key.as_ref(), policy.as_bytes());
    let matches = canonical::parse_hex32(signature)
        .zip(canonical::parse_hex32(&computed))
        .is_some_and(|(given, computed)| bool::from(given.ct_eq(&computed)));
    if !matches {
        return Err(from_auth(&super::AuthError::SignatureDoesNotMatch));
    }
    Ok((*access_key).to_string())
}

/// The SigV2 form: `AWSAccessKeyId`, `signature` (base64 HMAC-SHA1 of the
/// base64 policy).
fn check_v2(fields: &FormFields, creds: &Credentials) -> Result<String, S3Error> {
    let access_key = fields
        .get("awsaccesskeyid")
        .ok_or_else(|| missing("AWSAccessKeyId"))?;
    let signature = fields
        .get("signature")
        .ok_or_else(|| missing("Signature"))?;
    let policy = fields.get("policy").ok_or_else(|| missing("policy"))?;
    let secret = creds
        .secret(access_key)
        .ok_or_else(|| from_auth(&super::AuthError::InvalidAccessKeyId))?;
    if !sigv2::signature_matches(secret, policy.as_bytes(), signature.as_bytes()) {
        return Err(from_auth(&super::AuthError::SignatureDoesNotMatch));
    }
    Ok(access_key.to_string())
}

/// The condition as S3 quotes it in "Policy Condition failed: ...".
fn quote(c: &PostPolicyCondition) -> String {
    let j = |s: &str| serde_json::Value::from(s).to_string();
    match c {
        PostPolicyCondition::Eq { field, value } => {
            format!("[\"eq\", {}, {}]", j(&format!("${field}")), j(value))
        }
        PostPolicyCondition::StartsWith { field, prefix } => {
            format!(
                "[\"starts-with\", {}, {}]",
                j(&format!("${field}")),
                j(prefix)
            )
        }
        PostPolicyCondition::ContentLengthRange { min, max } => {
            format!("[\"content-length-range\", {min}, {max}]")
        }
    }
}

/// Checks the base64 `policy` against `fields` (and the URL's `bucket`)
/// at `now`; the `content-length-range`, if any.
pub fn check_policy(
    policy: &str,
    fields: &FormFields,
    bucket: &str,
    now: SystemTime,
) -> Result<Option<(u64, u64)>, S3Error> {
    let parsed = PostPolicy::from_base64(policy).map_err(|e| {
        S3Error::new(
            StatusCode::BAD_REQUEST,
            "InvalidPolicyDocument",
            format!("Invalid Policy: {e}"),
        )
    })?;
    let expiration: time::OffsetDateTime = parsed.expiration.clone().into();
    if time::OffsetDateTime::from(now) >= expiration {
        return Err(access_denied(
            "Invalid according to Policy: Policy expired.",
        ));
    }
    // The bucket is the URL's; a `bucket` field must agree with it.
    let value = |field: &str| -> Option<&str> {
        if field == "bucket" {
            Some(bucket)
        } else {
            fields.get(field)
        }
    };
    if let Some(b) = fields.get("bucket") {
        if b != bucket {
            return Err(access_denied(format!(
                "Invalid according to Policy: Policy Condition failed: [\"eq\", \"$bucket\", {}]",
                serde_json::Value::from(bucket)
            )));
        }
    }
    let mut range: Option<(u64, u64)> = None;
    for c in &parsed.conditions {
        let ok = match c {
            PostPolicyCondition::Eq { field, value: want } => value(field) == Some(want.as_str()),
            PostPolicyCondition::StartsWith { field, prefix } => {
                // S3: a missing field fails even an empty prefix.
                value(field).is_some_and(|v| v.starts_with(prefix.as_str()))
            }
            PostPolicyCondition::ContentLengthRange { min, max } => {
                range = Some(match range {
                    None => (*min, *max),
                    Some((a, b)) => ((*min).max(a), (*max).min(b)),
                });
                true
            }
        };
        if !ok {
            return Err(access_denied(format!(
                "Invalid according to Policy: Policy Condition failed: {}",
                quote(c)
            )));
        }
    }
    let covered = |name: &str| {
        parsed.conditions.iter().any(|c| match c {
            PostPolicyCondition::Eq { field, .. }
            | PostPolicyCondition::StartsWith { field, .. } => field == name,
            PostPolicyCondition::ContentLengthRange { .. } => false,
        })
    };
    if let Some((name, _)) = fields.iter().find(|(n, _)| !exempt(n) && !covered(n)) {
        return Err(access_denied(format!(
            "Invalid according to Policy: Extra input fields: {name}"
        )));
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use std::time::{Duration, UNIX_EPOCH};

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn fields(pairs: &[(&str, &str)]) -> FormFields {
        let mut f = FormFields::new();
        for (k, v) in pairs {
            f.push(k, (*v).to_string());
        }
        f
    }

    /// 2030-01-01T00:00:00Z less a day.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_893_456_000 - 86_400)
    }

    const POLICY: &str = r#"{"expiration":"2030-01-01T00:00:00.000Z","conditions":[{"bucket":"b"},["starts-with","$key","user/"],["content-length-range",1,10],["eq","$Content-Type","text/plain"]]}"#;

    #[test]
    fn conditions() {
        let p = b64(POLICY);
        let ok = fields(&[("key", "user/x"), ("Content-Type", "text/plain")]);
        assert_eq!(check_policy(&p, &ok, "b", now()).unwrap(), Some((1, 10)));
        let e = check_policy(&p, &ok, "other", now()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "AccessDenied"));
        assert_eq!(
            e.message,
            "Invalid according to Policy: Policy Condition failed: [\"eq\", \"$bucket\", \"b\"]"
        );
        let bad = fields(&[("key", "other/x"), ("content-type", "text/plain")]);
        let e = check_policy(&p, &bad, "b", now()).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid according to Policy: Policy Condition failed: [\"starts-with\", \"$key\", \"user/\"]"
        );
        let extra = fields(&[
            ("key", "user/x"),
            ("content-type", "text/plain"),
            ("x-ignore-me", "1"),
            ("acl", "private"),
        ]);
        let e = check_policy(&p, &extra, "b", now()).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid according to Policy: Extra input fields: acl"
        );
        let e = check_policy(
            &p,
            &ok,
            "b",
            UNIX_EPOCH + Duration::from_secs(1_893_456_000),
        )
        .unwrap_err();
        assert_eq!(e.message, "Invalid according to Policy: Policy expired.");
        let e = check_policy("!!", &ok, "b", now()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (400, "InvalidPolicyDocument"));
    }

    #[test]
    fn signatures() {
        let creds = Credentials::new(&[crate::config::KeyPair {
            access_key: "AK".into(),
            secret_key: "SK".into(),
        }]);
        let settings = AuthSettings::default();
        let policy = b64(r#"{"expiration":"2030-01-01T00:00:00Z","conditions":[{"key":"k"}]}"#);
        let v2 = sigv2::sign("SK", policy.as_bytes());
        let f = fields(&[
            ("key", "k"),
            ("AWSAccessKeyId", "AK"),
            ("policy", &policy),
            ("signature", &v2),
        ]);
        let g = check(&f, "b", &creds, &settings, now()).unwrap();
        assert_eq!(g.access_key, "AK");
        let f = fields(&[
            ("key", "k"),
            ("AWSAccessKeyId", "AK"),
            ("policy", &policy),
            ("signature", "AAAA"),
        ]);
        let e = check(&f, "b", &creds, &settings, now()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "SignatureDoesNotMatch"));
        let f = fields(&[
            ("key", "k"),
            ("AWSAccessKeyId", "NOPE"),
            ("policy", &policy),
            ("signature", &v2),
        ]);
        let e = check(&f, "b", &creds, &settings, now()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "InvalidAccessKeyId"));
        let f = fields(&[("key", "k")]);
        let e = check(&f, "b", &creds, &settings, now()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "AccessDenied"));

        // SigV4 form.
        let key_time = UNIX_EPOCH + Duration::from_secs(1_700_000_000 - 1_700_000_000 % 86_400);
        let date = canonical::format_amz_date(key_time).unwrap();
        let key = generate_signing_key("SK", key_time, "us-east-1", "s3");
        let sig = calculate_signature(key.as_ref(), policy.as_bytes());
        let cred = format!("AK/{}/us-east-1/s3/aws4_request", &date[..8]);
        let v4 = |sig: &str| {
            fields(&[
                ("key", "k"),
                ("x-amz-algorithm", "AWS4-HMAC-SHA256"),
                ("x-amz-credential", &cred),
                ("x-amz-date", &date),
                ("policy", &policy),
                ("x-amz-signature", sig),
            ])
        };
        // The form's own fields must then be covered by the policy.
        let e = check(&v4(&sig), "b", &creds, &settings, now()).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid according to Policy: Extra input fields: x-amz-algorithm"
        );
        let e = check(&v4(&"0".repeat(64)), "b", &creds, &settings, now()).unwrap_err();
        assert_eq!(e.code, "SignatureDoesNotMatch");
    }
}
