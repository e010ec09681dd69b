//! Blocking file helpers: records written aside and renamed into place,
//! directory fsync, temporary files removed unless kept. Called from
//! blocking tasks only.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::names::random_id;

/// A temporary file's path, removed when dropped unless [`keep`](Self::keep)
/// was called (it has been renamed into place).
#[derive(Debug)]
pub struct TmpPath {
    path: Option<PathBuf>,
}

impl TmpPath {
    /// A fresh name in `dir` (nothing is created).
    pub fn new_in(dir: &Path) -> io::Result<TmpPath> {
        Ok(TmpPath {
            path: Some(dir.join(random_id()?)),
        })
    }

    /// The path.
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// Renames it to `dest` and forgets it.
    pub fn rename_to(mut self, dest: &Path) -> io::Result<()> {
        let path = self.path.take().unwrap_or_default();
        match fs::rename(&path, dest) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = fs::remove_file(&path);
                Err(e)
            }
        }
    }
}

impl Drop for TmpPath {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Flushes a directory's entries (a rename into it) to disk.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `value` as JSON in a temporary file of `tmp_dir`, flushed to disk when
/// `fsync`; rename it into place with [`TmpPath::rename_to`].
pub fn write_json_aside<T: Serialize>(
    tmp_dir: &Path,
    value: &T,
    fsync: bool,
) -> io::Result<TmpPath> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    let tmp = TmpPath::new_in(tmp_dir)?;
    let mut f = File::create_new(tmp.path())?;
    f.write_all(&bytes)?;
    if fsync {
        f.sync_all()?;
    }
    Ok(tmp)
}

/// `value` as JSON at `dest`, written aside in `tmp_dir` and renamed into
/// place (the directory flushed too when `fsync`).
pub fn write_json_atomic<T: Serialize>(
    tmp_dir: &Path,
    dest: &Path,
    value: &T,
    fsync: bool,
) -> io::Result<()> {
    let tmp = write_json_aside(tmp_dir, value, fsync)?;
    tmp.rename_to(dest)?;
    if fsync {
        if let Some(parent) = dest.parent() {
            fsync_dir(parent)?;
        }
    }
    Ok(())
}

/// The largest record file read back: records are small (a 1 KiB key,
/// headers, metadata up to S3's 2 KiB).
const MAX_RECORD: u64 = 1 << 20;

/// A JSON record read back.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<T> {
    let len = fs::metadata(path)?.len();
    if len > MAX_RECORD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is {len} bytes, more than a record can be",
                path.display()
            ),
        ));
    }
    let bytes = fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Removes a file, a missing one being no error.
pub fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Empties a directory (creating it when missing).
pub fn clear_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmp_paths_vanish_unless_renamed() {
        let dir = tempfile::tempdir().unwrap();
        let t = TmpPath::new_in(dir.path()).unwrap();
        fs::write(t.path(), b"x").unwrap();
        let p = t.path().to_owned();
        drop(t);
        assert!(!p.exists());

        let dest = dir.path().join("dest");
        write_json_atomic(dir.path(), &dest, &vec![1, 2, 3], true).unwrap();
        let back: Vec<i32> = read_json(&dest).unwrap();
        assert_eq!(back, [1, 2, 3]);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
