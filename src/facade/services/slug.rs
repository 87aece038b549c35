//! Agent slugs made from display names (Yuxi: the name slugified, made unique with `-2`, `-3`...).

use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::resources::Agent;

/// The longest slug [`slugify`] makes, in characters: room is left for a `-NN` suffix within a DNS-1123
/// label's 63.
pub const MAX_BASE_SLUG: usize = 57;

/// A slug from a display name, in any script: the name transliterated to ASCII (`deunicode`: `研究助手`
/// gives `yan-jiu-zhu-shou`, `Café` gives `cafe`), then lowercase ASCII letters and digits with every
/// other run of characters as one `-`, at most [`MAX_BASE_SLUG`] characters. When nothing is left (a name
/// of punctuation only, or one deunicode cannot spell), `agent-` and 8 hex digits of the SHA-256 of the
/// name: stable, so the same name gives the same slug.
pub fn slugify(name: &str) -> String {
    let ascii = deunicode::deunicode(name);
    let mut slug = String::new();
    for c in ascii.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.truncate(MAX_BASE_SLUG);
    let slug = slug.trim_matches('-').to_string();
    if slug.is_empty() {
        let digest = Sha256::digest(name.as_bytes());
        format!("agent-{}", digest.iter().take(4).map(|b| format!("{b:02x}")).collect::<String>())
    } else {
        slug
    }
}

/// `base`, or the first of `base-2`, `base-3`... that no agent of `taken` has.
pub fn unique_slug(base: &str, taken: &[Agent]) -> String {
    let used: std::collections::HashSet<String> = taken.iter().map(|a| a.name_any()).collect();
    std::iter::once(base.to_string())
        .chain((2..=taken.len() + 2).map(|n| format!("{base}-{n}")))
        .find(|candidate| !used.contains(candidate))
        .unwrap_or_else(|| format!("{base}-{}", uuid::Uuid::new_v4().simple()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::AgentSpec;

    #[test]
    fn slugs_from_names_in_any_script() {
        assert_eq!(slugify("Deep Research!"), "deep-research");
        assert_eq!(slugify("  --A__b  "), "a-b");
        assert_eq!(slugify("研究助手"), "yan-jiu-zhu-shou");
        assert_eq!(slugify("Café Ümlaut"), "cafe-umlaut");
        assert_eq!(slugify(&"x".repeat(100)).len(), MAX_BASE_SLUG);
    }

    #[test]
    fn a_name_with_nothing_to_spell_gets_a_stable_hash() {
        let slug = slugify("！？");
        assert!(slug.starts_with("agent-") && slug.len() == "agent-".len() + 8, "{slug}");
        assert_eq!(slugify("！？"), slug, "stable");
        assert_ne!(slugify("——"), slug);
        assert!(crate::resources::validation::is_dns1123_label(&slug));
    }

    #[test]
    fn unique_slugs_take_the_first_free_suffix() {
        let agents: Vec<Agent> = ["a", "a-2", "a-4"].iter().map(|n| Agent::new(n, AgentSpec::default())).collect();
        assert_eq!(unique_slug("a", &agents), "a-3");
        assert_eq!(unique_slug("b", &agents), "b");
        let chinese: Vec<Agent> = vec![Agent::new("yan-jiu-zhu-shou", AgentSpec::default())];
        assert_eq!(unique_slug(&slugify("研究助手"), &chinese), "yan-jiu-zhu-shou-2");
    }
}
