//! How the admin commands show sizes and fractions, as nodetool does.

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
}
