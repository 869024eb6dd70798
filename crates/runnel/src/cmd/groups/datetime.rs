//! `--to-datetime` parsing without a date library: Kafka's `yyyy-MM-dd'T'HH:mm:ss.SSS` with
//! an optional zone (`Z`, `+HH:MM`, `+HHMM`). Kafka reads a zone-less time in the JVM's
//! default zone; we read it as UTC, which is what servers usually run in, and say so in the
//! flag's help.

use anyhow::{bail, Context, Result};

/// Milliseconds since the epoch for a Kafka reset datetime.
pub fn parse_datetime(s: &str) -> Result<i64> {
    let bad = || format!("--to-datetime {s}: use YYYY-MM-DDTHH:mm:SS.sss[Z|+HH:MM]");
    let (date, time) = s.split_once('T').with_context(bad)?;
    let (time, offset_ms) = split_zone(time).with_context(bad)?;
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, da] = d.as_slice() else {
        bail!(bad())
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<&str> = hms.split(':').collect();
    let [h, mi, se] = t.as_slice() else {
        bail!(bad())
    };
    let num = |v: &str| v.parse::<i64>().with_context(bad);
    let (year, month, day) = (num(y)?, num(mo)?, num(da)?);
    let (hour, minute, second) = (num(h)?, num(mi)?, num(se)?);
    if frac.is_empty() || frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        bail!(bad());
    }
    let millis = num(&format!("{frac:0<3}"))?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
        || hour < 0
        || minute < 0
        || second < 0
    {
        bail!(bad());
    }
    let days = days_from_civil(year, month, day);
    Ok(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis - offset_ms)
}

/// Splits a trailing zone off the time; returns the zone's offset from UTC in ms.
fn split_zone(time: &str) -> Option<(&str, i64)> {
    if let Some(t) = time.strip_suffix('Z') {
        return Some((t, 0));
    }
    let Some(pos) = time.rfind(['+', '-']) else {
        return Some((time, 0));
    };
    let (t, zone) = time.split_at(pos);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = digits[2..].parse().ok()?;
    Some((t, sign * (h * 60 + m) * 60_000))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_format() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00.000").unwrap(), 0);
        assert_eq!(
            parse_datetime("2023-11-14T22:13:20.000").unwrap(),
            1_700_000_000_000
        );
        assert_eq!(
            parse_datetime("2023-11-14T22:13:20.5Z").unwrap(),
            1_700_000_000_500
        );
        assert_eq!(
            parse_datetime("2023-11-15T00:13:20.000+02:00").unwrap(),
            1_700_000_000_000
        );
        assert_eq!(
            parse_datetime("2023-11-14T21:13:20.000-0100").unwrap(),
            1_700_000_000_000
        );
        assert!(parse_datetime("2023-11-14").is_err());
        assert!(parse_datetime("2023-13-14T00:00:00.000").is_err());
        assert!(parse_datetime("2023-11-14T00:00:00.0000").is_err());
    }
}
