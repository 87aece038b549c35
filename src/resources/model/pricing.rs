//! A Model's prices as exact numbers: decimal strings read into whole micro-units of the currency.

/// The form of a price: a decimal of at most 6 integer digits and at most 6 after the point, with no
/// sign, exponent or leading zero (`0`, `0.15`, `2.5`, `999999.999999`). The CRD's schema carries the
/// same pattern.
pub const PRICE_PATTERN: &str = r"^(0|[1-9][0-9]{0,5})(\.[0-9]{1,6})?$";

/// The price `text` (per million tokens) in micro-units of its currency (`"0.15"` is 150000), or `None`
/// when it does not follow [`PRICE_PATTERN`]. An integer, so that costs are summed without the
/// rounding of binary floats; at most 999999999999, so a product with a token count fits in `u128`.
pub fn parse_price_micros(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let whole_ok = whole == "0" || (!whole.is_empty() && whole.len() <= 6 && !whole.starts_with('0'));
    let fraction_ok = fraction.len() <= 6 && (fraction.is_empty() != text.contains('.'));
    if !(whole_ok && fraction_ok && digits(whole) && digits(fraction)) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = format!("{fraction:0<6}").parse().ok()?;
    Some(whole * 1_000_000 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_read_exactly_into_micro_units() {
        let cases = [
            ("0", Some(0)),
            ("0.1", Some(100_000)),
            ("0.15", Some(150_000)),
            ("2.5", Some(2_500_000)),
            ("0.000001", Some(1)),
            ("15", Some(15_000_000)),
            ("999999.999999", Some(999_999_999_999)),
            ("", None),
            (".5", None),
            ("1.", None),
            ("01", None),
            ("-1", None),
            ("+1", None),
            ("1e3", None),
            ("0.0000001", None),
            ("1000000", None),
            ("1,5", None),
            (" 1", None),
            ("1.2.3", None),
        ];
        let pattern = regex::Regex::new(PRICE_PATTERN).expect("a regex");
        for (text, micros) in cases {
            assert_eq!(parse_price_micros(text), micros, "{text:?}");
            assert_eq!(pattern.is_match(text), micros.is_some(), "{text:?}: the parser and the pattern agree");
        }
    }
}
