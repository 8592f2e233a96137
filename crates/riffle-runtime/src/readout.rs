//! A run's numbers as people read them: rates and counts with a K/M suffix, and
//! percentiles of durations; shared by `riffle run`'s progress line and summary and by
//! the benchmarks' tables, so both print a number alike.

use std::time::Duration;

/// The `p` quantile (nearest rank) of `durations` in milliseconds; 0 when empty.
pub fn percentile_ms(durations: &[Duration], p: f64) -> f64 {
    let mut sorted = durations.to_vec();
    sorted.sort();
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    sorted[(last as f64 * p).round() as usize].as_secs_f64() * 1e3
}

/// A rate or count with a K/M suffix: `4.35 M`, `12.0 K`.
pub fn human(n: f64) -> String {
    if n >= 1e6 {
        format!("{:.2} M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1} K", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_reads_with_a_k_or_m_suffix() {
        assert_eq!(human(4_350_000.0), "4.35 M");
        assert_eq!(human(12_000.0), "12.0 K");
        assert_eq!(human(999.0), "999");
    }

    #[test]
    fn a_percentile_is_the_nearest_rank_and_none_is_zero() {
        let ms = |n| Duration::from_millis(n);
        assert_eq!(percentile_ms(&[ms(30), ms(10), ms(20)], 0.5), 20.0);
        assert_eq!(percentile_ms(&[ms(30), ms(10), ms(20)], 0.99), 30.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }
}
