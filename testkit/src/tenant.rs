//! Tenants: key pairs a server accepts besides the default one
//! ([`AK`](crate::AK), [`SK`](crate::SK)), given to it in a credentials file (`--credentials-file`).

use std::path::{Path, PathBuf};

use crate::process::{test_server, ServerProc};
use crate::s3::S3;

/// A tenant: an access key and its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    /// Access key id.
    pub access_key: String,
    /// Secret access key.
    pub secret_key: String,
}

impl Tenant {
    /// The tenant `access_key` with `secret_key`.
    pub fn new(access_key: &str, secret_key: &str) -> Tenant {
        Tenant {
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
        }
    }

    /// The tenant `name`, whose secret is `<name>-secret`.
    pub fn named(name: &str) -> Tenant {
        Tenant::new(name, &format!("{name}-secret"))
    }

    /// A client of `url` signing as this tenant.
    pub fn s3(&self, url: &str) -> S3 {
        S3::with_keys(url, &self.access_key, &self.secret_key)
    }
}

/// A credentials file of tenants (one `ACCESS_KEY SECRET_KEY` line each,
/// mode 0600) in a directory of its own, removed on drop. A server reads it
/// at start: it may be dropped once the server has started.
#[derive(Debug)]
pub struct CredentialsFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl CredentialsFile {
    /// The file of `tenants`.
    pub fn new(tenants: &[Tenant]) -> CredentialsFile {
        let mut text = String::from("# tenants written by hipobj-testkit\n");
        for t in tenants {
            text.push_str(&format!("{} {}\n", t.access_key, t.secret_key));
        }
        CredentialsFile::with_text(&text)
    }

    /// A file holding `text` as it is (for malformed ones).
    pub fn with_text(text: &str) -> CredentialsFile {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("a directory for the credentials file");
        let path = dir.path().join("credentials");
        std::fs::write(&path, text).expect("write the credentials file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod 600 the credentials file");
        CredentialsFile { path, _dir: dir }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its path as a command-line argument.
    pub fn arg(&self) -> &str {
        self.path.to_str().expect("a UTF-8 temporary path")
    }
}

/// `hipobj-test-server ARGS` (the binary at `bin`) accepting `tenants`
/// (through `--credentials-file`) besides its default pair, once it has
/// printed the URL it serves. `args` usually starts with the port (`"0"`).
pub fn test_server_with_tenants(bin: &Path, tenants: &[Tenant], args: &[&str]) -> ServerProc {
    let file = CredentialsFile::new(tenants);
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--credentials-file", file.arg()]);
    test_server(bin, &all)
}
