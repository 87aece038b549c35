//! Thread ids: the shape of every id that names a conversation, and the seed's form of a child thread
//! id, `<parent_thread_id>_sub_<slug>_<uuid8>` (Yuxi's subagent design, "运行时调用链", step 3).
//!
//! Ids end up in Redis keys, pod labels and volume sub-paths, so every id is limited to a safe alphabet
//! that cannot climb out of a path (`/` and a leading `.` are impossible).

use std::fmt::Write;

/// The longest thread id, in characters (a DNS-1123 subdomain's limit, so any id fits an object name).
pub const MAX_THREAD_ID_LEN: usize = 253;

/// The longest parent thread id, in characters: a child's id adds `_sub_`, a slug of up to 63 characters,
/// `_` and 8 hex digits, and must stay within [`MAX_THREAD_ID_LEN`].
pub const MAX_PARENT_THREAD_ID_LEN: usize = MAX_THREAD_ID_LEN - 5 - 63 - 9;

/// The separator between a parent thread id and the subagent slug in a child thread id.
const CHILD_MARKER: &str = "_sub_";

/// Whether `id` is a well-formed id: 1 to 253 characters of `A-Z a-z 0-9 . _ -`, starting with a letter
/// or digit.
pub fn is_valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    match chars.next() {
        Some(first) if first.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    id.len() <= MAX_THREAD_ID_LEN && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The child thread id for a new delegation of `slug` from the thread `parent_thread_id`, with `suffix`
/// (any 32 bits, for example the first bytes of a UUID) as the 8 lowercase hex digits that make it unique.
pub fn child_thread_id(parent_thread_id: &str, slug: &str, suffix: u32) -> String {
    let mut id = String::with_capacity(parent_thread_id.len() + slug.len() + 14);
    id.push_str(parent_thread_id);
    id.push_str(CHILD_MARKER);
    id.push_str(slug);
    id.push('_');
    write!(id, "{suffix:08x}").expect("writing to a String cannot fail");
    id
}

/// Whether `thread_id` is a child thread of `parent_thread_id` for the subagent `slug`, that is exactly
/// `<parent_thread_id>_sub_<slug>_` followed by 8 lowercase hex digits. This is the check that lets a
/// parent continue an earlier child thread only with the same subagent and from the same conversation.
pub fn is_child_thread_of(thread_id: &str, parent_thread_id: &str, slug: &str) -> bool {
    let Some(rest) = thread_id.strip_prefix(parent_thread_id) else { return false };
    let Some(rest) = rest.strip_prefix(CHILD_MARKER) else { return false };
    let Some(rest) = rest.strip_prefix(slug) else { return false };
    let Some(hex) = rest.strip_prefix('_') else { return false };
    hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_thread_id_has_the_seed_form_and_round_trips() {
        let id = child_thread_id("t-1", "research-explorer", 0x0a1b2c3d);
        assert_eq!(id, "t-1_sub_research-explorer_0a1b2c3d");
        assert!(is_child_thread_of(&id, "t-1", "research-explorer"));
        assert!(is_valid_id(&id));
    }

    #[test]
    fn child_thread_check_rejects_other_parents_slugs_and_suffixes() {
        let cases = [
            ("t-2_sub_explorer_0a1b2c3d", "t-1", "explorer"),
            ("t-1_sub_verifier_0a1b2c3d", "t-1", "explorer"),
            ("t-1_sub_explorer_0A1B2C3D", "t-1", "explorer"),
            ("t-1_sub_explorer_0a1b2c3", "t-1", "explorer"),
            ("t-1_sub_explorer_0a1b2c3d4", "t-1", "explorer"),
            ("t-1_sub_explorer-0a1b2c3d", "t-1", "explorer"),
            ("t-1_explorer_0a1b2c3d", "t-1", "explorer"),
            ("t-1", "t-1", "explorer"),
        ];
        for (id, parent, slug) in cases {
            assert!(!is_child_thread_of(id, parent, slug), "{id} must not be a child of {parent} for {slug}");
        }
    }

    #[test]
    fn ids_are_limited_to_a_path_safe_alphabet() {
        for ok in ["a", "0", "thread-1", "T_1.2", &"a".repeat(253)] {
            assert!(is_valid_id(ok), "{ok} should be valid");
        }
        for bad in ["", ".", "..", "../x", "a/b", "-a", "_a", "a b", "é", &"a".repeat(254)] {
            assert!(!is_valid_id(bad), "{bad} should be invalid");
        }
    }
}
