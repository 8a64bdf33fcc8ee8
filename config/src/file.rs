//! Reading and atomically replacing the configuration file.
//!
//! Saving never leaves a half-written file behind: the new text goes to a temporary file in the
//! same directory, is flushed to disk, and only then renamed over the old file; the directory
//! is flushed too so that the rename itself survives a crash. The previous file is kept as
//! `<path>.bak` (written the same way) so that an operator can go back one step.
//!
//! The file holds secrets (the pair's `shared-key`, SNMP communities), so every file written
//! here, the temporary ones included, is created with mode 0600 and set to exactly 0600 before
//! a byte is written, whatever the umask and whatever the mode of the file it replaces.

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
        write_synced(&tmp, text.as_bytes())?;
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

/// The mode of every file written here: read and write for the owner only.
#[cfg(unix)]
pub(crate) const FILE_MODE: u32 = 0o600;

/// Creates `path` (which must not exist) with mode 0600, writes `bytes` and flushes it to
/// disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    let io_err = |err| ConfigError::io(path, err);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        // Created at most 0600 (the umask can only take bits away), then exactly 0600 before
        // the secrets are written.
        options.mode(FILE_MODE);
        let file = options.open(path).map_err(io_err)?;
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))
            .map_err(io_err)?;
        write_all_synced(file, bytes).map_err(io_err)
    }
    #[cfg(not(unix))]
    {
        let file = options.open(path).map_err(io_err)?;
        write_all_synced(file, bytes).map_err(io_err)
    }
}

fn write_all_synced(mut file: File, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    file.sync_all()
}

/// Copies the current file to `<path>.bak` through the temporary `tmp` (mode 0600, whatever
/// the old file's mode), so that the backup too is either the old one or complete.
fn keep_backup(path: &Path, tmp: &Path) -> Result<(), ConfigError> {
    let backup = backup_path(path);
    let result = (|| {
        let old = fs::read(path).map_err(|err| ConfigError::io(path, err))?;
        write_synced(tmp, &old)?;
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
