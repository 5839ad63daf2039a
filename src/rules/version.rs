//! The version the module registers with the server (`MODULE LIST` shows it
//! as `ver`): the crate's semver from Cargo.toml, so the module, the client
//! crate, the CLI and the Python wheel report one number.

/// `major.minor.patch` as one integer, two decimal digits each for minor and
/// patch, the way Redis' own modules encode theirs: 0.1.0 -> 100,
/// 1.2.3 -> 10203.
pub const fn encode(major: u32, minor: u32, patch: u32) -> i32 {
    // Two digits are all a part may use, or two versions would share a number.
    assert!(minor < 100 && patch < 100 && major < 21_000);
    (major * 10_000 + minor * 100 + patch) as i32
}

/// A decimal number from a `CARGO_PKG_VERSION_*` part (const: compile time).
pub const fn parse(digits: &str) -> u32 {
    let bytes = digits.as_bytes();
    assert!(!bytes.is_empty());
    let mut value = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit());
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

/// This build's version as the module registers it.
pub const MODULE_VERSION: i32 = encode(
    parse(env!("CARGO_PKG_VERSION_MAJOR")),
    parse(env!("CARGO_PKG_VERSION_MINOR")),
    parse(env!("CARGO_PKG_VERSION_PATCH")),
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_digits_each_for_minor_and_patch() {
        assert_eq!(encode(0, 1, 0), 100);
        assert_eq!(encode(0, 2, 0), 200);
        assert_eq!(encode(1, 2, 3), 10203);
        assert_eq!(encode(10, 0, 99), 100099);
    }

    #[test]
    fn parts_parse_as_decimal() {
        assert_eq!(parse("0"), 0);
        assert_eq!(parse("17"), 17);
    }

    #[test]
    fn the_registered_version_is_the_crates() {
        let expected = format!(
            "{}.{}.{}",
            MODULE_VERSION / 10_000,
            MODULE_VERSION / 100 % 100,
            MODULE_VERSION % 100
        );
        assert_eq!(expected, env!("CARGO_PKG_VERSION"));
    }
}
