//! Budget days and months: in UTC unless `PERPLEXITY_BUDGET_TZ` names an IANA zone, so
//! "today" is the operator's day and a reset happens at their midnight (daylight-saving
//! days are 23 or 25 hours long, as the zone says).

use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime as Zoned};

/// The zone budgets are counted in.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetZone {
    zone: TimeZone,
    name: String,
}

impl Default for BudgetZone {
    fn default() -> Self {
        BudgetZone {
            zone: TimeZone::UTC,
            name: "UTC".to_owned(),
        }
    }
}

/// The current day and month, and when each ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Windows {
    pub day_start_ms: i64,
    pub month_start_ms: i64,
    /// RFC 3339 with the zone's offset: when a daily or monthly budget resets.
    pub day_resets: String,
    pub month_resets: String,
}

impl BudgetZone {
    /// An IANA zone name (`Europe/Berlin`), from this machine's time-zone database.
    pub fn named(name: &str) -> Result<BudgetZone, String> {
        let zone = TimeZone::get(name).map_err(|_| {
            format!(
                "PERPLEXITY_BUDGET_TZ: '{name}' is not a time zone this machine knows (an IANA name such as Europe/Berlin; install the tzdata package if names are missing)"
            )
        })?;
        Ok(BudgetZone {
            zone,
            name: name.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The windows `at_ms` falls in.
    pub fn windows(&self, at_ms: i64) -> Windows {
        let now = self.zoned(at_ms);
        let start =
            |z: Result<Zoned, jiff::Error>| z.map_or(at_ms, |z| z.timestamp().as_millisecond());
        let stamp = |z: Result<Zoned, jiff::Error>| {
            z.map_or_else(
                |_| "unknown".to_owned(),
                |z| z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
            )
        };
        let month = now.first_of_month().and_then(|d| d.start_of_day());
        Windows {
            day_start_ms: start(now.start_of_day()),
            month_start_ms: start(month.clone()),
            day_resets: stamp(now.tomorrow().and_then(|d| d.start_of_day())),
            month_resets: stamp(month.and_then(|m| m.checked_add(jiff::Span::new().months(1)))),
        }
    }

    /// The calendar day of `at_ms` here (`2026-12-03`), for `usage --by day`.
    pub fn day_of(&self, at_ms: i64) -> String {
        self.zoned(at_ms).strftime("%Y-%m-%d").to_string()
    }

    /// The start of a calendar day here (`usage --since 2026-12-01`).
    pub fn start_of(&self, date: &str) -> Result<i64, String> {
        let d: jiff::civil::Date = date
            .parse()
            .map_err(|_| format!("'{date}' is not a date: write it as YYYY-MM-DD"))?;
        d.to_zoned_datetime(self.zone.clone())
            .map(|z| z.timestamp().as_millisecond())
            .map_err(|_| format!("'{date}' has no start in {}", self.name))
    }

    /// The start of the day `days` before the one `at_ms` falls in.
    pub fn days_before(&self, at_ms: i64, days: i64) -> i64 {
        let day = self.zoned(at_ms).date();
        day.checked_sub(jiff::Span::new().days(days))
            .ok()
            .and_then(|d| d.to_zoned_datetime(self.zone.clone()).ok())
            .map_or(at_ms - days * 86_400_000, |z| {
                z.timestamp().as_millisecond()
            })
    }

    fn zoned(&self, at_ms: i64) -> Zoned {
        Timestamp::from_millisecond(at_ms)
            .unwrap_or(Timestamp::UNIX_EPOCH)
            .to_zoned_datetime(self.zone.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_months_are_the_zones() {
        // 2026-12-03T22:30:00Z: still the 3rd in UTC, already the 4th in Tokyo.
        let at = 1_796_337_000_000;
        let utc = BudgetZone::default().windows(at);
        assert_eq!(utc.day_resets, "2026-12-04T00:00:00+00:00");
        assert_eq!(utc.month_resets, "2027-01-01T00:00:00+00:00");
        assert_eq!(utc.day_start_ms, 1_796_256_000_000);
        let tokyo = BudgetZone::named("Asia/Tokyo").unwrap();
        assert_eq!(tokyo.windows(at).day_resets, "2026-12-05T00:00:00+09:00");
        assert_eq!(tokyo.day_of(at), "2026-12-04");
        assert_eq!(BudgetZone::default().day_of(at), "2026-12-03");
        assert_eq!(
            BudgetZone::default().start_of("2026-12-03"),
            Ok(1_796_256_000_000)
        );
        assert!(BudgetZone::default().start_of("12/03/2026").is_err());
        assert!(BudgetZone::named("Mars/Olympus").is_err());
        assert_eq!(
            BudgetZone::default().days_before(at, 2),
            1_796_256_000_000 - 2 * 86_400_000
        );
    }
}
