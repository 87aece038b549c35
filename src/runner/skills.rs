//! Skills in the system prompt: the skills of the agent's scope (`/home/gem/skills`, one folder with a
//! `SKILL.md` per skill) are listed with their descriptions, and the `preloadSkills` are included whole.

use std::path::Path;

/// The longest `SKILL.md` put into the prompt whole, in bytes.
const MAX_PRELOAD_BYTES: usize = 64 * 1024;

/// One skill of the scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// The folder name.
    pub name: String,
    /// The `description:` of the `SKILL.md` front matter, or its first non-empty line.
    pub description: String,
    /// The whole `SKILL.md`.
    pub text: String,
}

/// The largest `SKILL.md` read, in bytes.
const MAX_SKILL_BYTES: u64 = 256 * 1024;

/// The skills in `dir`, sorted by name: each sub-folder with a `SKILL.md` that is a regular UTF-8 file of
/// at most 256 KiB. Reads go through a capability handle on `dir`, so a `SKILL.md` that is a symlink out
/// of the folder is skipped, and never block (a FIFO is skipped too). A missing folder has no skills.
pub fn read_skills(dir: &Path) -> Vec<Skill> {
    let Ok(root) = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()) else { return Vec::new() };
    let Ok(entries) = root.entries() else { return Vec::new() };
    let mut skills: Vec<Skill> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let text = read_bounded(&root, &Path::new(&name).join("SKILL.md"))?;
            Some(Skill { description: describe(&text), name, text })
        })
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

fn read_bounded(root: &cap_std::fs::Dir, path: &Path) -> Option<String> {
    use cap_std::fs::{OpenOptions, OpenOptionsExt};
    use std::io::Read;
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NONBLOCK);
    let file = root.open_with(path, &options).ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() > MAX_SKILL_BYTES {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_SKILL_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

fn describe(text: &str) -> String {
    let mut lines = text.lines();
    if text.starts_with("---") {
        lines.next();
        for line in lines.by_ref() {
            if line.trim() == "---" {
                break;
            }
            if let Some(value) = line.strip_prefix("description:") {
                return value.trim().trim_matches('"').to_string();
            }
        }
    }
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && *l != "---" && !l.contains(':'))
        .unwrap_or_default()
        .trim_start_matches('#')
        .trim()
        .to_string()
}

/// The prompt section about `skills`: a list of them, and the whole text of those in `preload`.
pub fn prompt_section(skills: &[Skill], preload: &[String]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut section = String::from(
        "## Skills\n\nThese skills are available under /home/gem/skills; read a skill's SKILL.md with read_file before you use it.\n\n",
    );
    for skill in skills {
        section
            .push_str(&format!("- {}: {} (/home/gem/skills/{}/SKILL.md)\n", skill.name, skill.description, skill.name));
    }
    for skill in skills.iter().filter(|s| preload.contains(&s.name)) {
        let mut text = skill.text.clone();
        if text.len() > MAX_PRELOAD_BYTES {
            let cut = (0..=MAX_PRELOAD_BYTES).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
            text.truncate(cut);
            text.push_str("\n[cut; read the rest with read_file]");
        }
        section.push_str(&format!("\n### Skill {}\n\n{}\n", skill.name, text.trim_end()));
    }
    Some(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_skill_files_inside_the_scope_are_listed_and_preloaded() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("claim-checking")).expect("mkdir");
        std::fs::write(
            dir.path().join("claim-checking/SKILL.md"),
            "---\nname: claim-checking\ndescription: Check claims against sources\n---\nStep 1: find the source.\n",
        )
        .expect("write");
        std::fs::create_dir_all(dir.path().join("notes")).expect("mkdir");
        std::fs::write(dir.path().join("notes/SKILL.md"), "# Taking notes\nWrite them down.\n").expect("write");
        std::fs::create_dir_all(dir.path().join("empty")).expect("mkdir");
        let outside = tempfile::tempdir().expect("temp dir");
        std::fs::write(outside.path().join("secret"), "the secret").expect("write");
        std::fs::create_dir_all(dir.path().join("linked")).expect("mkdir");
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("linked/SKILL.md")).expect("symlink");
        std::fs::create_dir_all(dir.path().join("fifo")).expect("mkdir");
        let fifo = std::ffi::CString::new(dir.path().join("fifo/SKILL.md").to_str().expect("utf-8")).expect("path");
        // SAFETY: mkfifo only creates a file at the given NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);

        let skills = read_skills(dir.path());
        assert_eq!(
            skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["claim-checking", "notes"],
            "a SKILL.md linked out of the folder, or a FIFO, is skipped without blocking"
        );
        assert_eq!(skills[0].description, "Check claims against sources");
        assert_eq!(skills[1].description, "Taking notes");

        let section = prompt_section(&skills, &["claim-checking".to_string()]).expect("a section");
        assert!(section.contains("- notes: Taking notes"));
        assert!(section.contains("### Skill claim-checking") && section.contains("Step 1: find the source."));
        assert!(!section.contains("Write them down."), "only preloaded skills are included whole");
        assert_eq!(prompt_section(&[], &[]), None);
    }
}
