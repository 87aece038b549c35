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

/// What a model call cost, in pico-units (10^-12) of its Model's currency: a price per million tokens
/// in micro-units times a token count is exactly that many pico-units, so costs add up with no
/// rounding at all. `None` when the Model states no price; prices left out count as 0 (input), and the
/// input price for cached input.
///
/// `usage.prompt_tokens` counts cached tokens too: `(prompt − cached) × input + cached × cachedInput +
/// completion × output`. Saturates rather than overflows (i64 holds 9.2 million currency units).
pub fn cost_picos(
    usage: &crate::resources::TokenUsage,
    pricing: Option<&super::ModelPricing>,
) -> Option<(String, i64)> {
    let pricing = pricing?;
    let price = |p: &Option<String>| p.as_deref().and_then(parse_price_micros).unwrap_or(0) as i128;
    let input = price(&pricing.input_per_million);
    let cached_price =
        pricing.cached_input_per_million.as_deref().and_then(parse_price_micros).map_or(input, i128::from);
    let output = price(&pricing.output_per_million);
    let cached = usage.cached_prompt_tokens.clamp(0, usage.prompt_tokens.max(0)) as i128;
    let fresh = usage.prompt_tokens.max(0) as i128 - cached;
    let picos = fresh * input + cached * cached_price + usage.completion_tokens.max(0) as i128 * output;
    Some((pricing.currency.clone(), picos.clamp(0, i64::MAX as i128) as i64))
}

/// An amount of pico-units as a decimal with at least 6 and at most 12 places (`0.000150`,
/// `1.250000`, `0.000000000125`).
pub fn format_picos(picos: i64) -> String {
    let whole = picos / 1_000_000_000_000;
    let fraction = format!("{:012}", (picos % 1_000_000_000_000).abs());
    let fraction = fraction.trim_end_matches('0');
    let fraction = format!("{fraction:0<6}");
    format!("{whole}.{fraction}")
}

/// A decimal amount of at most 6 integer and 12 fractional digits (a budget's `maxCost.amount`, a
/// tree's cost) in pico-units: `"1.5"` is 1.5 × 10^12. `None` for any other form.
pub fn parse_amount_picos(text: &str) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let whole_ok = whole == "0" || (!whole.is_empty() && whole.len() <= 6 && !whole.starts_with('0'));
    let fraction_ok = fraction.len() <= 12 && (fraction.is_empty() != text.contains('.'));
    if !(whole_ok && fraction_ok && digits(whole) && digits(fraction)) {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    let fraction: i64 = format!("{fraction:0<12}").parse().ok()?;
    Some(whole * 1_000_000_000_000 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_priced_exactly_with_cached_input_at_its_own_price() {
        let pricing: super::super::ModelPricing = serde_norway::from_str(
            "currency: CNY\ninputPerMillion: \"2\"\ncachedInputPerMillion: \"0.2\"\noutputPerMillion: \"3\"",
        )
        .expect("pricing");
        let usage = crate::resources::TokenUsage {
            prompt_tokens: 1_000,
            completion_tokens: 100,
            total_tokens: 1_100,
            cached_prompt_tokens: 400,
        };
        // 600 × 2 + 400 × 0.2 + 100 × 3 = 1580 millionths of a yuan.
        let (currency, picos) = cost_picos(&usage, Some(&pricing)).expect("priced");
        assert_eq!((currency.as_str(), picos), ("CNY", 1_580_000_000));
        assert_eq!(format_picos(picos), "0.001580");
        assert_eq!(cost_picos(&usage, None), None);
        assert_eq!(format_picos(125), "0.000000000125");
        assert_eq!(format_picos(2_500_000_000_000), "2.500000");
        assert_eq!(parse_amount_picos("1.5"), Some(1_500_000_000_000));
        assert_eq!(parse_amount_picos("0.000000000125"), Some(125));
        for bad in ["", "1.", ".5", "01", "-1", "1e3", "0.0000000000001", "1000000"] {
            assert_eq!(parse_amount_picos(bad), None, "{bad:?}");
        }
        // A tenth of a cent a million tokens, one token at a time, adds up to exactly that.
        let cheap: super::super::ModelPricing =
            serde_norway::from_str("currency: USD\ninputPerMillion: \"0.001\"").expect("pricing");
        let one = crate::resources::TokenUsage { prompt_tokens: 1, total_tokens: 1, ..Default::default() };
        let sum: i64 = (0..1_000_000).map(|_| cost_picos(&one, Some(&cheap)).expect("priced").1).sum();
        assert_eq!(format_picos(sum), "0.001000");
    }

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
