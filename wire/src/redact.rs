//! Shortening secret-bearing header values for logs.

/// Characters kept from the start of a redacted value.
const HEAD: usize = 8;
/// Characters kept from the end of a redacted value.
const TAIL: usize = 4;
/// Values shorter than this are not shown at all: keeping 12 of them would
/// show most of the value.
const MIN_SHOWN: usize = 24;

/// A token (or any header value) for a log line: only its first 8 and last 4
/// characters and its length, e.g. `01040302...cdab (88 chars)`. Values
/// shorter than 24 characters show only their length. Control and other
/// unprintable characters are escaped, so a value cannot forge log lines.
///
/// Never log a whole token: it names a registered buffer and its rkey.
pub fn redacted(value: &str) -> String {
    let len = value.chars().count();
    if len < MIN_SHOWN {
        return format!("[redacted] ({len} chars)");
    }
    let head: String = value
        .chars()
        .take(HEAD)
        .flat_map(char::escape_debug)
        .collect();
    let tail: String = value
        .chars()
        .skip(len - TAIL)
        .flat_map(char::escape_debug)
        .collect();
    format!("{head}...{tail} ({len} chars)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_only_head_and_tail() {
        let t = "0104030201fe000000000000000000000000000080a5a5a5a5ffffffffffffffff0100000000000000ffcdab";
        assert_eq!(redacted(t), "01040302...cdab (88 chars)");
    }

    #[test]
    fn short_values_show_nothing() {
        assert_eq!(redacted(""), "[redacted] (0 chars)");
        assert_eq!(redacted("abcdefghijkl"), "[redacted] (12 chars)");
    }

    #[test]
    fn escapes_control_characters() {
        let v = format!("\n{}\r", "a".repeat(30));
        assert_eq!(redacted(&v), "\\naaaaaaa...aaa\\r (32 chars)");
    }
}
