//! What shutdown owes, at the ground floor (it imports nothing of ours): the process may
//! end only once everything it acknowledged is done or reported as not done.
//!
//! - [`Obligations`]: side effects already promised to someone — a cancel POST behind an
//!   acknowledged `tasks/cancel`, a task's run id written to the store — run detached
//!   and are waited for at exit, within [`PROMISES_WITHIN`].
//! - [`Progress`]: when a peer last took bytes from us. A drain gives up on a *stuck*
//!   peer (nothing written for [`STUCK_PEER`] while there was something to write), never
//!   on a slow one: a reply that is being read is finished, whatever its size.
//!
//! SECURITY.md, "What shutdown guarantees", is the user-facing version of this file.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::task::TaskTracker;

/// How long a call cancelled while its create is on the wire keeps going to learn the
/// run's id. The create may already have started a paid run; dropping it before its
/// answer would leave that run with no id anyone can collect it by.
pub const CREATE_ANSWER_GRACE: Duration = Duration::from_secs(10);

/// A peer that took no byte for this long while we had bytes for it is stuck, not slow.
/// Longer than [`CREATE_ANSWER_GRACE`]: a call cut mid-create is silent that long before
/// its reply is written, and that silence is ours, not the peer's.
pub const STUCK_PEER: Duration = Duration::from_secs(15);
const _: () = assert!(STUCK_PEER.as_secs() > CREATE_ANSWER_GRACE.as_secs());

/// The longest exit waits for promised side effects (each is one bounded request or
/// one store write; this only bounds a wedged upstream or disk).
pub const PROMISES_WITHIN: Duration = Duration::from_secs(30);

/// Side effects that must finish before the process exits.
#[derive(Debug, Clone, Default)]
pub struct Obligations {
    tracker: TaskTracker,
}

impl Obligations {
    /// Runs `work` detached; [`Obligations::settle`] waits for it.
    pub fn spawn<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(work);
    }

    /// Waits (at most `within`) until every promise made so far — and any made while
    /// waiting — is kept. False if some were still running at the deadline.
    pub async fn settle(&self, within: Duration) -> bool {
        self.tracker.close();
        let kept = tokio::time::timeout(within, self.tracker.wait())
            .await
            .is_ok();
        self.tracker.reopen();
        kept
    }

    /// Promises not yet kept.
    pub fn pending(&self) -> usize {
        self.tracker.len()
    }
}

/// When a writer last got bytes to its peer, and whether it has bytes waiting now.
#[derive(Debug)]
pub struct Progress {
    origin: Instant,
    last_ms: AtomicU64,
    writing: AtomicBool,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
            writing: AtomicBool::new(false),
        }
    }
}

impl Progress {
    /// Bytes are waiting for the peer from now on.
    pub fn writing(&self) {
        if !self.writing.swap(true, Ordering::AcqRel) {
            self.stamp();
        }
    }

    /// The peer took bytes.
    pub fn stamp(&self) {
        let now = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Release);
    }

    /// Nothing is waiting for the peer.
    pub fn idle(&self) {
        self.stamp();
        self.writing.store(false, Ordering::Release);
    }

    /// How long since the peer last took bytes.
    pub fn since_last(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        self.origin.elapsed().saturating_sub(last)
    }

    /// Resolves once bytes have waited for the peer, untaken, for `after`; never while
    /// there is nothing to write.
    pub async fn stuck(&self, after: Duration) {
        loop {
            let waited = self.since_last();
            if self.writing.load(Ordering::Acquire) && waited >= after {
                return;
            }
            let check = after
                .saturating_sub(waited)
                .clamp(Duration::from_millis(100), after);
            tokio::time::sleep(check).await;
        }
    }

    /// Resolves, no sooner than `after` from now, once nothing has waited for the peer
    /// for `after` (every byte handed to the writer has been taken).
    pub async fn done_for(&self, after: Duration) {
        tokio::time::sleep(after).await;
        loop {
            let waited = self.since_last();
            if !self.writing.load(Ordering::Acquire) && waited >= after {
                return;
            }
            tokio::time::sleep(after.saturating_sub(waited).max(Duration::from_millis(50))).await;
        }
    }

    /// Resolves once the peer took no bytes for `after`, whether or not any were waiting
    /// (for a server whose replies are still being computed, and whose silence counts
    /// from `stamp`).
    pub async fn silent(&self, after: Duration) {
        loop {
            let waited = self.since_last();
            if waited >= after {
                return;
            }
            tokio::time::sleep((after - waited).max(Duration::from_millis(100))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_writer_with_nothing_to_write_is_never_stuck() {
        let progress = Progress::default();
        let stuck = tokio::time::timeout(SHORT * 2, progress.stuck(SHORT));
        assert!(stuck.await.is_err(), "idle is not stuck");
        progress.writing();
        tokio::time::sleep(SHORT / 2).await;
        progress.stamp();
        // Bytes keep moving: a moment after the last of them is not yet stuck.
        let early = tokio::time::timeout(SHORT / 3, progress.stuck(SHORT));
        assert!(early.await.is_err(), "slow is not stuck");
        let late = tokio::time::timeout(SHORT * 2, progress.stuck(SHORT));
        assert!(late.await.is_ok(), "bytes waited untaken: stuck");
    }

    #[tokio::test]
    async fn promises_are_waited_for_even_those_made_while_waiting() {
        let obligations = Obligations::default();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let (inner, flag) = (obligations.clone(), done.clone());
        obligations.spawn(async move {
            tokio::time::sleep(SHORT / 3).await;
            inner.spawn(async move {
                tokio::time::sleep(SHORT / 3).await;
                flag.store(true, Ordering::Release);
            });
        });
        assert!(obligations.settle(PROMISES_WITHIN).await);
        assert!(done.load(Ordering::Acquire));
        assert_eq!(obligations.pending(), 0);
        obligations.spawn(std::future::pending());
        assert!(!obligations.settle(SHORT).await);
    }
}
