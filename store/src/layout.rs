//! Where things are on disk. Every path is built from validated bucket
//! names, key hashes ([`crate::names::key_hash`]), ids drawn by the store
//! and part numbers; never from a key's text.
//!
//! ```text
//! <root>/hipobj-store.json                   the store's marker
//! <root>/tmp/                                buckets being created or removed
//! <root>/buckets/<bucket>/bucket.json
//! <root>/buckets/<bucket>/tmp/               files being written
//! <root>/buckets/<bucket>/objects/<h0h1>/<h2h3>/<hash>.json         the record
//! <root>/buckets/<bucket>/objects/<h0h1>/<h2h3>/<hash>.<id>.data    the bytes
//! <root>/buckets/<bucket>/uploads/<upload-id>/upload.json
//! <root>/buckets/<bucket>/uploads/<upload-id>/part-<n>.json
//! <root>/buckets/<bucket>/uploads/<upload-id>/part-<n>.<id>.data
//! ```

use std::path::{Path, PathBuf};

use crate::names::fan_out;

/// The store's root.
#[derive(Debug, Clone)]
pub struct RootDir(pub PathBuf);

impl RootDir {
    /// The marker file that says this directory is a store.
    pub fn marker(&self) -> PathBuf {
        self.0.join("hipobj-store.json")
    }

    /// Where buckets are made and removed aside.
    pub fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }

    /// The directory of the buckets.
    pub fn buckets(&self) -> PathBuf {
        self.0.join("buckets")
    }

    /// A bucket's directory (`name` is a valid bucket name).
    pub fn bucket(&self, name: &str) -> BucketDir {
        BucketDir(self.buckets().join(name))
    }
}

/// A bucket's directory.
#[derive(Debug, Clone)]
pub struct BucketDir(pub PathBuf);

impl BucketDir {
    /// Its record.
    pub fn record(&self) -> PathBuf {
        self.0.join("bucket.json")
    }

    /// Its temporary files.
    pub fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }

    /// The top of its objects.
    pub fn objects(&self) -> PathBuf {
        self.0.join("objects")
    }

    /// The fan-out directory of a key hash.
    pub fn object_dir(&self, hash: &str) -> PathBuf {
        let (a, b) = fan_out(hash);
        self.objects().join(a).join(b)
    }

    /// An object's record.
    pub fn object_record(&self, hash: &str) -> PathBuf {
        self.object_dir(hash).join(format!("{hash}.json"))
    }

    /// An object's bytes, data id `data`.
    pub fn object_data(&self, hash: &str, data: &str) -> PathBuf {
        self.object_dir(hash).join(format!("{hash}.{data}.data"))
    }

    /// The top of its multipart uploads.
    pub fn uploads(&self) -> PathBuf {
        self.0.join("uploads")
    }

    /// An upload's directory.
    pub fn upload(&self, upload_id: &str) -> PathBuf {
        self.uploads().join(upload_id)
    }

    /// An upload's record.
    pub fn upload_record(&self, upload_id: &str) -> PathBuf {
        self.upload(upload_id).join("upload.json")
    }

    /// A part's record.
    pub fn part_record(&self, upload_id: &str, number: i32) -> PathBuf {
        self.upload(upload_id).join(format!("part-{number}.json"))
    }

    /// A part's bytes, data id `data`.
    pub fn part_data(&self, upload_id: &str, number: i32, data: &str) -> PathBuf {
        self.upload(upload_id)
            .join(format!("part-{number}.{data}.data"))
    }
}

/// Whether `p` is inside `root` by its components (no `..` anywhere).
pub fn is_inside(root: &Path, p: &Path) -> bool {
    p.starts_with(root)
        && !p
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
}
