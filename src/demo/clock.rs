//! Wall-clock helpers: Unix time now in ms, and the two date formats the fake writes
//! (`server_time` of `/search`, the HTTP-date of `Retry-After`).

use std::time::{Duration, UNIX_EPOCH};

/// Unix time now, in ms (0 if the clock is before 1970), as the fake's records keep it.
pub(crate) fn now_ms() -> u64 {
    crate::clock::since_epoch().as_millis() as u64
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time in ms (UTC).
pub(crate) fn iso8601(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(ms / 1000)).to_string()
}

/// The IMF-fixdate of RFC 9110 (`Wed, 21 Oct 2026 07:28:00 GMT`) for a Unix time in
/// seconds.
pub(crate) fn imf_fixdate(secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_formats_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_780_000_000_123), "2026-05-28T20:26:40Z");
    }

    #[test]
    fn imf_fixdate_formats_http_dates() {
        assert_eq!(imf_fixdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        // RFC 9110's own example.
        assert_eq!(imf_fixdate(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(imf_fixdate(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(imf_fixdate(1_792_567_680), "Wed, 21 Oct 2026 07:28:00 GMT");
    }
}
