//! Reading and atomically replacing the configuration file.
//!
//! Saving never leaves a half-written file behind: the new text goes to a temporary file in the
//! same directory, is flushed to disk, and only then renamed over the old file; the directory
//! is flushed too so that the rename itself survives a crash. The previous file is kept as
//! `<path>.bak` (written the same way) so that an operator can go back one step.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ConfigError;

/// Distinguishes temporary files of concurrent saves within one process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Reads the whole file as UTF-8; the error names the path.
pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
    fs::read_to_string(path).map_err(|err| ConfigError::io(path, err))
}

/// `<path>.bak`: the path with `.bak` appended (not replacing the extension).
pub(crate) fn backup_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".bak");
    PathBuf::from(name)
}

/// Replaces `path` with `text` atomically, keeping the previous file as `<path>.bak`.
pub(crate) fn save_atomic(text: &str, path: &Path) -> Result<(), ConfigError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(file_name) = path.file_name() else {
        return Err(ConfigError::io(
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
        ));
    };
    let tmp_path = |what: &str| {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut name = OsString::from(".");
        name.push(file_name);
        name.push(format!(".{what}.{}.{n}", std::process::id()));
        dir.join(name)
    };
    let previous = match fs::metadata(path) {
        Ok(meta) => Some(meta),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(ConfigError::io(path, err)),
    };

    let tmp = tmp_path("tmp");
    let result = (|| {
        write_synced(&tmp, text.as_bytes(), previous.as_ref())?;
        if previous.is_some() {
            keep_backup(path, &tmp_path("bak"))?;
        }
        fs::rename(&tmp, path).map_err(|err| ConfigError::io(path, err))?;
        sync_dir(&dir)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and useless now; the error that matters is
        // the one already in `result`.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` (which must not exist), writes `bytes`, copies the permissions of the file
/// being replaced, and flushes it to disk.
fn write_synced(
    path: &Path,
    bytes: &[u8],
    previous: Option<&fs::Metadata>,
) -> Result<(), ConfigError> {
    let io_err = |err| ConfigError::io(path, err);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err)?;
    file.write_all(bytes).map_err(io_err)?;
    if let Some(meta) = previous {
        file.set_permissions(meta.permissions()).map_err(io_err)?;
    }
    file.sync_all().map_err(io_err)
}

/// Copies the current file to `<path>.bak` through the temporary `tmp`, so that the backup too
/// is either the old one or complete.
fn keep_backup(path: &Path, tmp: &Path) -> Result<(), ConfigError> {
    let backup = backup_path(path);
    let result = (|| {
        fs::copy(path, tmp).map_err(|err| ConfigError::io(path, err))?;
        File::open(tmp)
            .and_then(|f| f.sync_all())
            .map_err(|err| ConfigError::io(tmp, err))?;
        fs::rename(tmp, &backup).map_err(|err| ConfigError::io(&backup, err))
    })();
    if result.is_err() {
        // Best effort, as in `save_atomic`.
        let _ = fs::remove_file(tmp);
    }
    result
}

/// Flushes the directory entry changes (the rename) to disk.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<(), ConfigError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|err| ConfigError::io(dir, err))
}

/// Directories cannot be opened and flushed portably outside Unix; rename is still atomic.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<(), ConfigError> {
    Ok(())
}
