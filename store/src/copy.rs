//! Copying stored bytes (CopyObject, UploadPartCopy) into a new temporary
//! file: by the kernel (`copy_file_range` through `std::io::copy`) when no
//! MD5 is needed, else in 1 MiB reads hashed on the way.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use s3s::crypto::{Checksum as _, Md5};

/// `len` bytes of `src` from `start` into a new file at `dst`, flushed to
/// disk when `fsync`; their MD5 when `md5`.
pub fn copy_range(
    src: &mut File,
    start: u64,
    len: u64,
    dst: &Path,
    md5: bool,
    fsync: bool,
) -> io::Result<Option<[u8; 16]>> {
    src.seek(SeekFrom::Start(start))?;
    let mut out = File::create_new(dst)?;
    let mut taken = src.take(len);
    let sum = if md5 {
        let mut h = Md5::default();
        let mut buf = vec![0u8; 1 << 20];
        let mut n_total = 0u64;
        loop {
            let n = taken.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            out.write_all(&buf[..n])?;
            n_total += n as u64;
        }
        if n_total != len {
            return Err(short());
        }
        Some(h.finalize())
    } else {
        if io::copy(&mut taken, &mut out)? != len {
            return Err(short());
        }
        None
    };
    if fsync {
        out.sync_all()?;
    }
    Ok(sum)
}

fn short() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the source file is shorter than its record says",
    )
}
