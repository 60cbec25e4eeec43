//! How the admin commands show sizes, fractions, durations and throttles, as
//! nodetool does.

/// Bytes as `394.97 KiB`, `1.2 GiB` (two decimals, binary units).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// A fraction as `33.4%` (nodetool's `##0.0%`).
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// Seconds as `45s`, `3m 20s`, `2h 05m` or `3d 04h`, rounded up (an ETA does
/// not read `0s` while work remains); `-` when negative or not finite.
pub fn human_duration(seconds: f64) -> String {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return "-".to_string();
    }
    let total = seconds.ceil() as u64;
    let (days, hours, minutes, secs) = (
        total / 86_400,
        total / 3600 % 24,
        total / 60 % 60,
        total % 60,
    );
    if days > 0 {
        format!("{days}d {hours:02}h")
    } else if hours > 0 {
        format!("{hours}h {minutes:02}m")
    } else if minutes > 0 {
        format!("{minutes}m {secs:02}s")
    } else {
        format!("{secs}s")
    }
}

/// A stream throttle as `24 MiB/s`, or `unthrottled` for 0.
pub fn stream_throttle(mib_per_second: u64) -> String {
    if mib_per_second == 0 {
        "unthrottled".to_string()
    } else {
        format!("{mib_per_second} MiB/s")
    }
}

/// A clock offset and its uncertainty in microseconds, in milliseconds:
/// `+2003.1 ms ±0.2`; `?` when not measured.
pub fn clock_offset(offset_micros: Option<i64>, uncertainty_micros: Option<i64>) -> String {
    match offset_micros {
        None => "?".to_string(),
        Some(offset) => format!(
            "{:+.1} ms ±{:.1}",
            offset as f64 / 1000.0,
            uncertainty_micros.unwrap_or(0) as f64 / 1000.0
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_fractions_read_like_nodetool() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(404_451), "394.97 KiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
        assert_eq!(percent(0.334), "33.4%");
        assert_eq!(percent(1.0), "100.0%");
    }

    #[test]
    fn durations_round_up_and_keep_two_units() {
        assert_eq!(human_duration(0.0), "0s");
        assert_eq!(human_duration(0.2), "1s");
        assert_eq!(human_duration(200.0), "3m 20s");
        assert_eq!(human_duration(7500.0), "2h 05m");
        assert_eq!(human_duration(3.0 * 86_400.0 + 4.0 * 3600.0), "3d 04h");
        assert_eq!(human_duration(f64::NAN), "-");
        assert_eq!(human_duration(-1.0), "-");
    }

    #[test]
    fn a_zero_stream_throttle_reads_unthrottled() {
        assert_eq!(stream_throttle(24), "24 MiB/s");
        assert_eq!(stream_throttle(0), "unthrottled");
    }
}
