//! Per-test temporary directories: kept when the test fails, removed when it passes (kept too
//! when `SBC_E2E_KEEP` is set, to read the logs of a passing run).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// A temporary directory for one test's files (configs, logs, SIPp traces).
///
/// Cheap to clone: every [`crate::SbcNode`] and [`crate::SippProcess`] holds a clone, so the
/// directory outlives the processes writing into it. When the last clone is dropped the
/// directory is removed, unless the thread is panicking (a failing test), in which case it is
/// kept and its path printed on stderr, or `SBC_E2E_KEEP` is set in the environment.
#[derive(Debug, Clone)]
pub struct TestDir(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    path: PathBuf,
}

impl TestDir {
    /// Creates `$TMPDIR/sbc-e2e/<label>-<pid>-<n>`, the label shortened to
    /// [`MAX_LABEL`] bytes so that `<dir>/mgmt.sock` fits in a Unix socket path (107 bytes).
    ///
    /// # Panics
    /// If the directory cannot be created.
    #[must_use]
    pub fn new(label: &str) -> Self {
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let label = shortened(&label);
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir()
            .join("sbc-e2e")
            .join(format!("{label}-{}-{n}", std::process::id()));
        if path.exists() {
            let _ = std::fs::remove_dir_all(&path);
        }
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        Self(Arc::new(Inner { path }))
    }

    /// A directory named after the current test (see [`current_test_name`]).
    #[must_use]
    pub fn for_current_test() -> Self {
        Self::new(current_test_name().as_deref().unwrap_or("test"))
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// A path inside the directory.
    #[must_use]
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.path.join(name)
    }
}

/// The longest label a directory keeps: a longer one keeps its start and its end (which
/// names the node, e.g. `-sbc-a`), joined by `~`.
pub const MAX_LABEL: usize = 48;

fn shortened(label: &str) -> String {
    if label.len() <= MAX_LABEL {
        return label.to_owned();
    }
    // The label is ASCII (see `TestDir::new`), so byte offsets are char boundaries.
    let tail = 12;
    format!(
        "{}~{}",
        &label[..MAX_LABEL - tail - 1],
        &label[label.len() - tail..]
    )
}

/// The current test's function name, from its thread's name (libtest names each test's thread
/// after the test's path, `module::test` when tests live in modules): `None` outside a named
/// thread.
///
/// The module path is left out so that `<dir>/mgmt.sock` stays well within the 107 bytes of a
/// Unix socket path; the directory is unique anyway (process id and a counter).
#[must_use]
pub fn current_test_name() -> Option<String> {
    let thread = std::thread::current();
    let path = thread.name()?;
    Some(path.rsplit("::").next().unwrap_or(path).to_owned())
}

impl Drop for Inner {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("sbc-e2e: test failed, keeping {}", self.path.display());
        } else if std::env::var_os("SBC_E2E_KEEP").is_some() {
            eprintln!("sbc-e2e: SBC_E2E_KEEP set, keeping {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_keep_their_start_and_end_within_the_limit() {
        let long = "strangers_on_the_sync_and_witness_ports_get_nothing_and_change_nothing-sbc-a";
        let short = shortened(long);
        assert_eq!(short.len(), MAX_LABEL);
        assert!(short.starts_with("strangers_on_the_sync"), "{short}");
        assert!(short.ends_with("-sbc-a"), "{short}");
        assert_eq!(shortened("basic-udp"), "basic-udp");
    }
}
