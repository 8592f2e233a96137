//! Parsing counts (`10M`, `100K`) and durations (`4s`, `500ms`) from the command line.

use std::time::Duration;

/// Parses a count with an optional K/M/G suffix (powers of 1000) and `_` separators,
/// as SQL table options take it.
pub fn parse_count(s: &str) -> Result<u64, String> {
    riffle_sql::connectors::parse_count(s)
        .ok_or_else(|| format!("`{s}` is not a count; write e.g. 1000, 100K or 10M"))
}

/// Parses an amount of memory: a number with an optional unit, `B`, `K`/`KB`/`KiB`,
/// `M`/`MB`/`MiB`, `G`/`GB`/`GiB` or `T`/`TB`/`TiB`, all powers of 1024 (as Flink's
/// memory sizes), case-insensitive: `16MiB`, `256mb`, `1.5G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let wrong = || format!("`{s}` is not an amount of memory; write e.g. 512MiB or 4GiB");
    let value: f64 = number.trim().parse().map_err(|_| wrong())?;
    let power = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 1,
        "m" | "mb" | "mib" => 2,
        "g" | "gb" | "gib" => 3,
        "t" | "tb" | "tib" => 4,
        _ => return Err(wrong()),
    };
    let bytes = value * 1024f64.powi(power);
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(wrong());
    }
    Ok(bytes as u64)
}

/// Parses a duration such as `4s`, `500ms`, `1m`, `2h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a duration; write e.g. 500ms, 4s or 1m"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{s}`; use ms, s, m or h"
            ))
        }
    };
    if seconds < 0.0 || !seconds.is_finite() {
        return Err(format!("`{s}` must not be negative"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// An event time (ns since the Unix epoch) for people: `2025-01-01 00:05:23.598` (UTC),
/// or `end of input` for the final watermark.
pub fn event_time(nanos: i64) -> String {
    if nanos == i64::MAX {
        return "end of input".into();
    }
    riffle_core::arrow::temporal_conversions::timestamp_ns_to_datetime(nanos)
        .map_or_else(|| format!("{nanos} ns"), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_are_powers_of_1024_in_any_case() {
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("256mb"), Ok(256 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2 KiB"), Ok(2048));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5 parsecs").is_err());
        assert!(parse_size("-1G").is_err());
    }

    #[test]
    fn counts_take_suffixes() {
        assert_eq!(parse_count("10M"), Ok(10_000_000));
        assert_eq!(parse_count("100k"), Ok(100_000));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert_eq!(parse_count("2.5K"), Ok(2500));
        assert!(parse_count("ten").is_err());
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("4s"), Ok(Duration::from_secs(4)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("3 parsecs").is_err());
    }
}
