//! How long the graph waits before trying a failed model call again.

use std::time::Duration;

use crate::runner::model::ModelError;

/// The first retry waits this long; each further one twice as long, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait of the doubling backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// The longest a provider's own wait (`retry-after`, Gemini's `RetryInfo`) is honoured: a minute holds
/// a per-minute rate limit's window, while a provider asking for an hour (a daily quota) would keep a
/// run, its pod and its lease idle for nothing a retry could change soon.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The wait before retry number `attempt` (from 1) of a call that failed with `error`: the doubling
/// backoff (0.5 s, 1 s, 2 s... up to 8 s), or the provider's own wait when it asked for longer, capped
/// at [`MAX_RETRY_AFTER`].
pub fn backoff(attempt: u32, error: &ModelError) -> Duration {
    let doubling = FIRST_BACKOFF.saturating_mul(1 << attempt.saturating_sub(1).min(8)).min(MAX_BACKOFF);
    match error.retry_after() {
        Some(asked) => doubling.max(asked.min(MAX_RETRY_AFTER)),
        None => doubling,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(seconds: Option<u64>) -> ModelError {
        ModelError::Transient { message: "busy".into(), retry_after: seconds.map(Duration::from_secs) }
    }

    #[test]
    fn the_wait_doubles_and_a_providers_wait_is_honoured_up_to_the_cap() {
        let ms = Duration::from_millis;
        let cases = [
            (1, None, ms(500)),
            (2, None, ms(1000)),
            (4, None, ms(4000)),
            (5, None, ms(8000)),
            (30, None, ms(8000)),
            (1, Some(3), ms(3000)),
            (5, Some(3), ms(8000)),
            (1, Some(0), ms(500)),
            (1, Some(59), ms(59_000)),
            (1, Some(3600), MAX_RETRY_AFTER),
        ];
        for (attempt, asked, wait) in cases {
            assert_eq!(backoff(attempt, &after(asked)), wait, "attempt {attempt}, asked {asked:?}");
        }
        assert_eq!(backoff(1, &ModelError::fatal("no")), ms(500));
    }
}
