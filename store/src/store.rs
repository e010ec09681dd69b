//! The store: its root directory, the buckets and each bucket's index of
//! objects and uploads, kept in step with the files. Operations here work
//! in the store's own terms; [`crate::s3`] translates s3s's requests.
//!
//! Concurrency: each bucket has one mutex over its index. It is held only
//! for map updates and the renames that make a change visible, so the
//! index and the files change in the same order; data is written and
//! hashed outside it. A reader opens the data file while holding it, so a
//! concurrent replacement (which removes the old file afterwards) never
//! pulls the file away from a read that has begun.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use s3s::{s3_error, S3Result};

use crate::error::{internal, io_err, StoreError};
use crate::fsio::{self, TmpPath};
use crate::layout::{BucketDir, RootDir};
use crate::meta::{now_ms, BucketMeta, ObjectMeta, PartMeta, UploadMeta, FORMAT};
use crate::names::{is_hash, is_id, key_hash, random_id, valid_bucket_name};

/// How the store writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// Flush every object, part and record to disk (file and directory
    /// fsync) before the write is answered. Off trades durability across
    /// a power loss for speed; atomicity holds either way.
    pub fsync: bool,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig { fsync: true }
    }
}

/// The embedded S3 store over a directory. Cheap to clone: clones share
/// it.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub root: RootDir,
    pub config: StoreConfig,
    pub buckets: RwLock<BTreeMap<String, Arc<Bucket>>>,
}

/// A bucket: its directory and its index.
#[derive(Debug)]
pub(crate) struct Bucket {
    pub name: String,
    pub dir: BucketDir,
    pub created_ms: i64,
    pub state: Mutex<BucketState>,
}

/// A bucket's index.
#[derive(Debug, Default)]
pub(crate) struct BucketState {
    /// Its objects by key.
    pub objects: BTreeMap<String, Arc<ObjectMeta>>,
    /// Its multipart uploads by upload id.
    pub uploads: BTreeMap<String, Upload>,
    /// Removed: nothing may be added any more.
    pub deleted: bool,
}

/// A multipart upload in progress.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    pub meta: UploadMeta,
    pub parts: BTreeMap<i32, PartMeta>,
}

impl Bucket {
    /// Its index, locked. A poisoned lock is taken as it is: every
    /// update leaves the maps consistent before anything can panic.
    pub fn lock(&self) -> MutexGuard<'_, BucketState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The marker's content.
#[derive(serde::Serialize, serde::Deserialize)]
struct Marker {
    store: String,
    format: u32,
}

const MARKER_NAME: &str = "hipobj-store";

/// Runs blocking file work on Tokio's blocking pool; it runs to its end
/// even when the request that started it is dropped.
pub(crate) async fn blocking<T, F>(f: F) -> S3Result<T>
where
    F: FnOnce() -> S3Result<T> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| internal("blocking task", e))?
}

/// Creates `dir` when missing; when `fsync`, flushes its parent's and
/// grandparent's entries (fan-out directories are created on demand).
pub(crate) fn ensure_dir(dir: &Path, fsync: bool) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    if fsync {
        let mut p = dir.parent();
        for _ in 0..2 {
            if let Some(d) = p {
                fsync::fsync_dir_quiet(d);
                p = d.parent();
            }
        }
    }
    Ok(())
}

mod fsync {
    pub fn fsync_dir_quiet(d: &std::path::Path) {
        if let Err(e) = crate::fsio::fsync_dir(d) {
            tracing::warn!(dir = %d.display(), error = %e, "store: directory not flushed");
        }
    }
}

impl Store {
    /// Opens the store at `root`, creating it when missing, and rebuilds
    /// the index from the records: leftover temporary files and data files
    /// no record names (a write cut short) are removed. Blocking.
    pub fn open(root: &Path, config: StoreConfig) -> Result<Store, StoreError> {
        let rd = RootDir(root.to_owned());
        fs::create_dir_all(root).map_err(StoreError::io(root))?;
        let marker = rd.marker();
        match fs::read(&marker) {
            Ok(bytes) => {
                let m: Option<Marker> = serde_json::from_slice(&bytes).ok();
                match m {
                    Some(m) if m.store == MARKER_NAME && m.format == FORMAT => {}
                    _ => {
                        return Err(StoreError::Format {
                            path: marker,
                            found: String::from_utf8_lossy(&bytes).chars().take(80).collect(),
                        })
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fsio::write_json_atomic(
                    root,
                    &marker,
                    &Marker {
                        store: MARKER_NAME.into(),
                        format: FORMAT,
                    },
                    config.fsync,
                )
                .map_err(StoreError::io(&marker))?;
            }
            Err(e) => return Err(StoreError::io(&marker)(e)),
        }
        fsio::clear_dir(&rd.tmp()).map_err(StoreError::io(rd.tmp()))?;
        fs::create_dir_all(rd.buckets()).map_err(StoreError::io(rd.buckets()))?;

        let mut buckets = BTreeMap::new();
        for entry in fs::read_dir(rd.buckets()).map_err(StoreError::io(rd.buckets()))? {
            let entry = entry.map_err(StoreError::io(rd.buckets()))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !valid_bucket_name(&name) {
                tracing::warn!(name, "store: not a bucket, skipped");
                continue;
            }
            let dir = rd.bucket(&name);
            let meta: BucketMeta = match fsio::read_json(&dir.record()) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(bucket = name, error = %e, "store: bucket without a record, skipped");
                    continue;
                }
            };
            let state = load_bucket(&dir)?;
            buckets.insert(
                name.clone(),
                Arc::new(Bucket {
                    name,
                    dir,
                    created_ms: meta.created_ms,
                    state: Mutex::new(state),
                }),
            );
        }
        tracing::debug!(root = %root.display(), buckets = buckets.len(), "store opened");
        Ok(Store {
            inner: Arc::new(Inner {
                root: rd,
                config,
                buckets: RwLock::new(buckets),
            }),
        })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root.0
    }

    /// How it writes.
    pub fn config(&self) -> StoreConfig {
        self.inner.config
    }

    pub(crate) fn fsync(&self) -> bool {
        self.inner.config.fsync
    }

    /// A bucket, or NoSuchBucket.
    pub(crate) fn bucket(&self, name: &str) -> S3Result<Arc<Bucket>> {
        let buckets = self.inner.buckets.read().unwrap_or_else(|p| p.into_inner());
        buckets
            .get(name)
            .cloned()
            .ok_or_else(|| s3_error!(NoSuchBucket, "The specified bucket does not exist"))
    }

    /// The buckets, by name.
    pub(crate) fn buckets(&self) -> Vec<Arc<Bucket>> {
        let buckets = self.inner.buckets.read().unwrap_or_else(|p| p.into_inner());
        buckets.values().cloned().collect()
    }

    /// Creates a bucket: made aside and renamed into place.
    pub(crate) async fn create_bucket(&self, name: &str) -> S3Result<()> {
        if !valid_bucket_name(name) {
            return Err(s3_error!(
                InvalidBucketName,
                "The specified bucket is not valid."
            ));
        }
        let this = self.clone();
        let name = name.to_owned();
        blocking(move || {
            let mut buckets = this
                .inner
                .buckets
                .write()
                .unwrap_or_else(|p| p.into_inner());
            if buckets.contains_key(&name) {
                return Err(s3_error!(
                    BucketAlreadyOwnedByYou,
                    "Your previous request to create the named bucket succeeded and you already own it."
                ));
            }
            let root = &this.inner.root;
            let fsync = this.fsync();
            let aside = BucketDir(root.tmp().join(random_id().map_err(io_err("random id"))?));
            let created_ms = now_ms();
            let make = || -> io::Result<()> {
                for d in [aside.0.clone(), aside.tmp(), aside.objects(), aside.uploads()] {
                    fs::create_dir_all(d)?;
                }
                fsio::write_json_atomic(
                    &aside.tmp(),
                    &aside.record(),
                    &BucketMeta {
                        format: FORMAT,
                        name: name.clone(),
                        created_ms,
                    },
                    fsync,
                )?;
                let dest = root.bucket(&name);
                fs::rename(&aside.0, &dest.0)?;
                if fsync {
                    fsio::fsync_dir(&root.buckets())?;
                }
                Ok(())
            };
            if let Err(e) = make() {
                let _ = fs::remove_dir_all(&aside.0);
                return Err(internal("create bucket", e));
            }
            buckets.insert(
                name.clone(),
                Arc::new(Bucket {
                    dir: root.bucket(&name),
                    name,
                    created_ms,
                    state: Mutex::new(BucketState::default()),
                }),
            );
            Ok(())
        })
        .await
    }

    /// Removes an empty bucket (its uploads in progress go with it).
    pub(crate) async fn delete_bucket(&self, name: &str) -> S3Result<()> {
        let this = self.clone();
        let name = name.to_owned();
        blocking(move || {
            let mut buckets = this
                .inner
                .buckets
                .write()
                .unwrap_or_else(|p| p.into_inner());
            let bucket = buckets
                .get(&name)
                .cloned()
                .ok_or_else(|| s3_error!(NoSuchBucket, "The specified bucket does not exist"))?;
            let aside = this
                .inner
                .root
                .tmp()
                .join(random_id().map_err(io_err("random id"))?);
            {
                let mut state = bucket.lock();
                if !state.objects.is_empty() {
                    return Err(s3_error!(
                        BucketNotEmpty,
                        "The bucket you tried to delete is not empty"
                    ));
                }
                fs::rename(&bucket.dir.0, &aside).map_err(io_err("delete bucket"))?;
                state.deleted = true;
                state.uploads.clear();
            }
            buckets.remove(&name);
            drop(buckets);
            if this.fsync() {
                fsync::fsync_dir_quiet(&this.inner.root.buckets());
            }
            if let Err(e) = fs::remove_dir_all(&aside) {
                tracing::warn!(error = %e, "store: a deleted bucket's files stay until the next start");
            }
            Ok(())
        })
        .await
    }
}

/// A bucket's index rebuilt from its records. Temporary files, data files
/// no record names, and unreadable records are removed or skipped.
fn load_bucket(dir: &BucketDir) -> Result<BucketState, StoreError> {
    fsio::clear_dir(&dir.tmp()).map_err(StoreError::io(dir.tmp()))?;
    fs::create_dir_all(dir.objects()).map_err(StoreError::io(dir.objects()))?;
    fs::create_dir_all(dir.uploads()).map_err(StoreError::io(dir.uploads()))?;
    let mut state = BucketState::default();
    // objects/<aa>/<bb>/...
    let mut leaves: Vec<PathBuf> = Vec::new();
    for a in read_dirs(&dir.objects())? {
        leaves.extend(read_dirs(&a)?);
    }
    for leaf in leaves {
        let mut records: Vec<(String, PathBuf)> = Vec::new();
        let mut datas: Vec<(String, PathBuf)> = Vec::new();
        for entry in fs::read_dir(&leaf).map_err(StoreError::io(&leaf))? {
            let entry = entry.map_err(StoreError::io(&leaf))?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if let Some(hash) = name.strip_suffix(".json") {
                records.push((hash.to_owned(), path));
            } else if name.ends_with(".data") {
                datas.push((name, path));
            }
        }
        let mut wanted = std::collections::HashSet::new();
        for (hash, path) in records {
            let meta: ObjectMeta = match fsio::read_json(&path) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "store: unreadable object record, skipped");
                    continue;
                }
            };
            if !is_hash(&hash) || key_hash(&meta.key) != hash || !is_id(&meta.data) {
                tracing::warn!(file = %path.display(), "store: object record not of its key, skipped");
                continue;
            }
            wanted.insert(format!("{hash}.{}.data", meta.data));
            state.objects.insert(meta.key.clone(), Arc::new(meta));
        }
        for (name, path) in datas {
            if !wanted.contains(&name) {
                tracing::debug!(file = %path.display(), "store: removing data no record names");
                let _ = fs::remove_file(&path);
            }
        }
    }
    for up_dir in read_dirs(&dir.uploads())? {
        let Some(id) = up_dir
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_owned)
        else {
            continue;
        };
        if !is_id(&id) {
            continue;
        }
        let meta: UploadMeta = match fsio::read_json::<UploadMeta>(&dir.upload_record(&id)) {
            Ok(m) if m.upload_id == id => m,
            _ => {
                tracing::warn!(upload = id, "store: upload without a good record, removed");
                let _ = fs::remove_dir_all(&up_dir);
                continue;
            }
        };
        let mut parts = BTreeMap::new();
        let mut datas = Vec::new();
        for entry in fs::read_dir(&up_dir).map_err(StoreError::io(&up_dir))? {
            let entry = entry.map_err(StoreError::io(&up_dir))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with("part-") && name.ends_with(".json") {
                match fsio::read_json::<PartMeta>(&entry.path()) {
                    Ok(p) if is_id(&p.data) && name == format!("part-{}.json", p.number) => {
                        parts.insert(p.number, p);
                    }
                    _ => {
                        tracing::warn!(file = %entry.path().display(), "store: bad part record, skipped")
                    }
                }
            } else if name.ends_with(".data") {
                datas.push((name, entry.path()));
            }
        }
        for (name, path) in datas {
            let named = parts
                .values()
                .any(|p| name == format!("part-{}.{}.data", p.number, p.data));
            if !named {
                let _ = fs::remove_file(path);
            }
        }
        state.uploads.insert(id, Upload { meta, parts });
    }
    Ok(state)
}

/// The subdirectories of `dir`.
fn read_dirs(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(StoreError::io(dir))? {
        let entry = entry.map_err(StoreError::io(dir))?;
        if entry
            .file_type()
            .map_err(StoreError::io(entry.path()))?
            .is_dir()
        {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Makes a written object visible: its data file renamed into place, its
/// record written aside and, under the bucket's lock once `check` accepts
/// the object now there, renamed over the old one; the old data file is
/// removed afterwards. On any error nothing changes.
pub(crate) fn commit_object(
    bucket: &Bucket,
    meta: ObjectMeta,
    data: TmpPath,
    fsync: bool,
    check: impl FnOnce(Option<&ObjectMeta>) -> S3Result<()>,
) -> S3Result<Arc<ObjectMeta>> {
    let hash = key_hash(&meta.key);
    let dir = bucket.dir.object_dir(&hash);
    ensure_dir(&dir, fsync).map_err(io_err("object directory"))?;
    let data_path = bucket.dir.object_data(&hash, &meta.data);
    data.rename_to(&data_path).map_err(io_err("object data"))?;
    let placed = PlacedFile(Some(data_path));
    let record =
        fsio::write_json_aside(&bucket.dir.tmp(), &meta, fsync).map_err(io_err("object record"))?;
    if fsync {
        fsio::fsync_dir(&dir).map_err(io_err("object directory"))?;
    }
    let meta = Arc::new(meta);
    let old = {
        let mut state = bucket.lock();
        if state.deleted {
            return Err(s3_error!(
                NoSuchBucket,
                "The specified bucket does not exist"
            ));
        }
        check(state.objects.get(&meta.key).map(|m| &**m))?;
        record
            .rename_to(&bucket.dir.object_record(&hash))
            .map_err(io_err("object record"))?;
        placed.keep();
        state.objects.insert(meta.key.clone(), meta.clone())
    };
    if fsync {
        fsync::fsync_dir_quiet(&dir);
    }
    if let Some(old) = old {
        if old.data != meta.data {
            let _ = fsio::remove_if_present(&bucket.dir.object_data(&hash, &old.data));
        }
    }
    Ok(meta)
}

/// A file placed under its final name but not yet named by a record:
/// removed on drop unless kept.
struct PlacedFile(Option<PathBuf>);

impl PlacedFile {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for PlacedFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

/// Removes an object; `Ok(false)` when there was none.
pub(crate) fn remove_object(bucket: &Bucket, key: &str, fsync: bool) -> S3Result<bool> {
    let hash = key_hash(key);
    let old = {
        let mut state = bucket.lock();
        if state.deleted {
            return Err(s3_error!(
                NoSuchBucket,
                "The specified bucket does not exist"
            ));
        }
        if !state.objects.contains_key(key) {
            return Ok(false);
        }
        fsio::remove_if_present(&bucket.dir.object_record(&hash))
            .map_err(io_err("remove object record"))?;
        state.objects.remove(key)
    };
    if let Some(old) = old {
        let _ = fsio::remove_if_present(&bucket.dir.object_data(&hash, &old.data));
        if fsync {
            fsync::fsync_dir_quiet(&bucket.dir.object_dir(&hash));
        }
    }
    Ok(true)
}

/// An object's record and its data file opened, or NoSuchKey.
pub(crate) fn open_object(bucket: &Bucket, key: &str) -> S3Result<(Arc<ObjectMeta>, fs::File)> {
    let state = bucket.lock();
    let meta = state
        .objects
        .get(key)
        .cloned()
        .ok_or_else(|| s3_error!(NoSuchKey, "The specified key does not exist."))?;
    let file = fs::File::open(bucket.dir.object_data(&key_hash(key), &meta.data))
        .map_err(io_err("open object data"))?;
    Ok((meta, file))
}
