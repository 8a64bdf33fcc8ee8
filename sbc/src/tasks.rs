//! The node's background tasks and how they end: its service tasks (the app's loops, the alarm
//! service, the trap sink, the management listeners and sessions, the pair's event tasks) are
//! spawned on one [`Tasks`], which holds a [`TaskTracker`] and one [`CancellationToken`] (mini-redis's shutdown shape: one
//! signal to every task, then wait until each has ended). At shutdown the node cancels the
//! token and waits for the tracker: loops that hold nothing stop at their next await; tasks
//! with work to finish (the trap sink's queue) watch the token themselves and finish it first.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The node's background tasks.
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Tasks {
    /// No task yet, no shutdown signalled.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `task`, which is dropped at its next await once shutdown is signalled.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let shutdown = self.shutdown.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = task => {}
                () = shutdown.cancelled() => {}
            }
        });
    }

    /// Spawns `task`, which watches [`Tasks::shutdown_signal`] itself, to finish its work
    /// before it ends.
    pub fn spawn_draining<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(task);
    }

    /// The shutdown signal, for a task spawned with [`Tasks::spawn_draining`].
    #[must_use]
    pub fn shutdown_signal(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Signals shutdown to every task and waits until all have ended, at most `bound`.
    /// Returns false if some were still running then (they are left to the runtime's end).
    pub async fn shutdown(&self, bound: Duration) -> bool {
        self.shutdown.cancel();
        self.tracker.close();
        tokio::time::timeout(bound, self.tracker.wait())
            .await
            .is_ok()
    }

    /// Tasks not ended yet.
    #[must_use]
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Whether every task has ended.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::Tasks;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_loops_and_lets_draining_tasks_finish() {
        let tasks = Tasks::new();
        tasks.spawn(async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let finished = Arc::new(AtomicBool::new(false));
        let (signal, done) = (tasks.shutdown_signal(), finished.clone());
        tasks.spawn_draining(async move {
            signal.cancelled().await;
            // Work left to do after the signal (a queue to send) still runs.
            tokio::time::sleep(Duration::from_millis(10)).await;
            done.store(true, Ordering::SeqCst);
        });
        assert_eq!(tasks.len(), 2);
        assert!(tasks.shutdown(Duration::from_secs(5)).await);
        assert!(finished.load(Ordering::SeqCst));
        assert!(tasks.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_ignores_the_signal_is_reported() {
        let tasks = Tasks::new();
        tasks.spawn_draining(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        assert!(!tasks.shutdown(Duration::from_secs(1)).await);
        assert_eq!(tasks.len(), 1);
    }
}
