//! A CPU hog: busy-looping child processes (`sh -c 'while :; do :; done'`), killed by their
//! PIDs when the [`CpuHog`] is dropped, also when a test panics. Each child is a shell running
//! a builtin loop: it starts no process of its own, so its PID is all there is to kill.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Running busy loops; dropping it kills and reaps every one.
#[derive(Debug)]
pub struct CpuHog {
    children: Vec<Child>,
    started: Instant,
}

impl CpuHog {
    /// Starts `n` busy loops at the default priority (the nodes' own: they compete as equals).
    ///
    /// # Panics
    /// If a child cannot be started (those already started are killed first).
    #[must_use]
    pub fn start(n: usize) -> Self {
        let mut hog = Self {
            children: Vec::with_capacity(n),
            started: Instant::now(),
        };
        for _ in 0..n {
            let child = Command::new("sh")
                .arg("-c")
                .arg("while :; do :; done")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            match child {
                Ok(c) => hog.children.push(c),
                Err(e) => {
                    hog.stop();
                    panic!("cannot start a CPU hog: {e}");
                }
            }
        }
        hog
    }

    /// The PIDs of the busy loops.
    #[must_use]
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// How long it has run.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Whether every busy loop still runs (none exited or was killed by someone else).
    pub fn all_running(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Kills (SIGKILL, by PID) and reaps every busy loop.
    pub fn stop(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop();
    }
}
