//! Per-test temporary directories: kept when the test fails, removed when it passes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// A temporary directory for one test's files (configs, logs, SIPp traces).
///
/// Cheap to clone: every [`crate::SbcNode`] and [`crate::SippProcess`] holds a clone, so the
/// directory outlives the processes writing into it. When the last clone is dropped the
/// directory is removed, unless the thread is panicking (a failing test), in which case it is
/// kept and its path printed on stderr.
#[derive(Debug, Clone)]
pub struct TestDir(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    path: PathBuf,
}

impl TestDir {
    /// Creates `$TMPDIR/sbc-e2e/<label>-<pid>-<n>`.
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

    /// A directory named after the current test (libtest names the test thread after the test).
    #[must_use]
    pub fn for_current_test() -> Self {
        let thread = std::thread::current();
        Self::new(thread.name().unwrap_or("test"))
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

impl Drop for Inner {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("sbc-e2e: test failed, keeping {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
