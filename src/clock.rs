//! The wall clock, read in one place: records, ledger rows, leases and cached answers
//! are stamped in Unix milliseconds (token lifetimes in seconds), and a stamp written
//! by one module is compared by another, so all of them read the same clock the same way.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time since the Unix epoch now (zero if the clock is before 1970).
pub fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Unix time now, in ms (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    since_epoch().as_millis() as i64
}
