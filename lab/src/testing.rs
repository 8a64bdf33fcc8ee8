//! Bounded waits and assertions for the tests that drive the traffic generator (the lab's own
//! and the end-to-end tests through a real `sbc`): every wait has a limit and panics with what
//! it was waiting for.

use std::future::Future;
use std::time::Duration;

use crate::traffic::Snapshot;

/// Awaits `fut` at most `limit`, panicking with `what` otherwise.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not done within {limit:?}"))
}

/// Polls `cond` every 10 ms for at most `limit`.
pub async fn until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    within(limit, what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Runs blocking code (SIPp, the sbc process) off the runtime's workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking task")
}

/// Asserts a UAC or UAS ended `calls` calls, all completed, none failed, none in progress.
pub fn assert_all_completed(s: &Snapshot, calls: u64) {
    assert!(
        s.attempted == calls
            && s.answered == calls
            && s.completed == calls
            && s.failed == 0
            && s.in_progress == 0
            && s.active == 0,
        "expected {calls} completed calls:\n{}\n{s:#?}",
        s.summary()
    );
}
