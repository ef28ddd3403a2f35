//! Amounts in integer millionths of the API's currency: what the ledger sums and budgets
//! compare. Parsed from the operator's decimals (`5.00`) and printed for people.

/// Millionths of the currency unit (1 USD = 1,000,000).
pub type Micros = i64;

pub const PER_UNIT: Micros = 1_000_000;

/// `5`, `5.00`, `0.000001`: non-negative, at most six decimals, at most a trillion.
pub fn parse(text: &str) -> Result<Micros, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "'{t}' is not an amount: write a non-negative decimal such as 5.00 (at most six decimals)"
        )
    };
    let (whole, fraction) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || fraction.len() > 6
        || whole.len() > 12
    {
        return Err(bad());
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let fraction: i64 = format!("{fraction:0<6}").parse().map_err(|_| bad())?;
    Ok(whole * PER_UNIT + fraction)
}

/// A float the API or a TOML file gave (`0.0123`), to the nearest millionth; `None` for
/// negative, infinite or absurd values.
pub fn from_f64(value: f64) -> Option<Micros> {
    (value.is_finite() && (0.0..1e12).contains(&value))
        .then(|| (value * PER_UNIT as f64).round() as Micros)
}

/// For people: at least two decimals, more while they carry digits (`5.00`, `0.0123`).
pub fn format(amount: Micros) -> String {
    let sign = if amount < 0 { "-" } else { "" };
    let a = amount.unsigned_abs();
    let mut fraction = format!("{:06}", a % PER_UNIT as u64);
    while fraction.len() > 2 && fraction.ends_with('0') {
        fraction.pop();
    }
    format!("{sign}{}.{fraction}", a / PER_UNIT as u64)
}

/// For JSON: the amount as a number in currency units.
pub fn as_f64(amount: Micros) -> f64 {
    amount as f64 / PER_UNIT as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_parse_exactly_and_print_for_people() {
        assert_eq!(parse("5"), Ok(5_000_000));
        assert_eq!(parse("5.00"), Ok(5_000_000));
        assert_eq!(parse("0.05"), Ok(50_000));
        assert_eq!(parse(".5"), Ok(500_000));
        assert_eq!(parse("0.000001"), Ok(1));
        for bad in ["", ".", "-1", "1e3", "0.0000001", "5,00", "1.2.3", " x"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format(5_000_000), "5.00");
        assert_eq!(format(12_300), "0.0123");
        assert_eq!(format(456), "0.000456");
        assert_eq!(format(0), "0.00");
        assert_eq!(from_f64(0.0123), Some(12_300));
        assert_eq!(from_f64(-1.0), None);
        assert_eq!(from_f64(f64::NAN), None);
    }
}
