//! Skills: projected at run start from the read-only skills library into the agent's own skills scope
//! (`/home/gem/skills`, one folder with a `SKILL.md` per skill), then listed in the system prompt with
//! their descriptions, the `preloadSkills` included whole.

use std::path::{Path, PathBuf};

/// The most files one projection copies.
const MAX_PROJECTED_FILES: usize = 2000;
/// The most bytes one projection copies.
const MAX_PROJECTED_BYTES: u64 = 64 * 1024 * 1024;

/// What a projection did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Projection {
    /// The skills copied into the scope, sorted.
    pub projected: Vec<String>,
    /// The skills the agent names that the library does not have (or that are not valid names), sorted.
    pub missing: Vec<String>,
}

/// A projection failed.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The skills library cannot be opened.
    #[error("cannot open the skills library {}: {source}", path.display())]
    OpenLibrary {
        /// The library.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The skills scope cannot be made.
    #[error("cannot make the skills scope {}: {source}", path.display())]
    MakeScope {
        /// The scope.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The skills scope cannot be opened.
    #[error("cannot open the skills scope {}: {source}", path.display())]
    OpenScope {
        /// The scope.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The skill's earlier copy in the scope cannot be removed.
    #[error("cannot replace skill {skill} in the scope: {source}")]
    Replace {
        /// The skill.
        skill: String,
        /// Why.
        source: std::io::Error,
    },
    /// The skill's folder in the library cannot be opened.
    #[error("cannot open skill {skill}: {source}")]
    OpenSkill {
        /// The skill.
        skill: String,
        /// Why.
        source: std::io::Error,
    },
    /// The skill's folder in the scope cannot be made.
    #[error("cannot make skill {skill} in the scope: {source}")]
    MakeSkill {
        /// The skill.
        skill: String,
        /// Why.
        source: std::io::Error,
    },
    /// The skill's folder in the scope cannot be opened.
    #[error("cannot open skill {skill} in the scope: {source}")]
    OpenSkillInScope {
        /// The skill.
        skill: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file or folder of the skill cannot be read or copied.
    #[error("cannot copy skill {skill}: {source}")]
    Copy {
        /// The skill.
        skill: String,
        /// Why.
        source: std::io::Error,
    },
    /// Copying the skill would take the projection past 2000 files or 64 MiB.
    #[error(
        "cannot copy skill {skill}: the skills exceed {MAX_PROJECTED_FILES} files or {} MiB",
        MAX_PROJECTED_BYTES / (1024 * 1024)
    )]
    TooLarge {
        /// The skill being copied when the budget ran out.
        skill: String,
    },
}

/// Copies the skills `names` (`None`: every skill of the library) from `library` into `scope`: each a
/// folder of the library with a `SKILL.md`, copied with its regular files and folders (symlinks, FIFOs and
/// devices are skipped; the library is read through a capability handle, so nothing outside it is read).
/// Skills already in the scope are replaced, so a continued thread sees the library as it is now. A name
/// must be a single path segment without a leading `.`.
///
/// Errors: the library cannot be opened ([`ProjectError::OpenLibrary`]), the scope cannot be made or
/// written (the other variants, naming the scope or the skill), or the skills exceed 2000 files or 64 MiB
/// ([`ProjectError::TooLarge`]).
pub fn project(library: &Path, names: Option<&[String]>, scope: &Path) -> Result<Projection, ProjectError> {
    let source = cap_std::fs::Dir::open_ambient_dir(library, cap_std::ambient_authority())
        .map_err(|source| ProjectError::OpenLibrary { path: library.to_path_buf(), source })?;
    let available: Vec<String> = read_skills(library).into_iter().map(|s| s.name).collect();
    let wanted: Vec<String> = match names {
        Some(names) => names.to_vec(),
        None => available.clone(),
    };
    std::fs::create_dir_all(scope).map_err(|source| ProjectError::MakeScope { path: scope.to_path_buf(), source })?;
    let target = cap_std::fs::Dir::open_ambient_dir(scope, cap_std::ambient_authority())
        .map_err(|source| ProjectError::OpenScope { path: scope.to_path_buf(), source })?;
    let mut projection = Projection::default();
    let mut budget = (MAX_PROJECTED_FILES, MAX_PROJECTED_BYTES);
    for name in wanted {
        let valid = !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', '\0']);
        if !valid || !available.contains(&name) {
            projection.missing.push(name);
            continue;
        }
        let skill = || name.clone();
        if target.symlink_metadata(&name).is_ok() {
            target.remove_dir_all(&name).map_err(|source| ProjectError::Replace { skill: skill(), source })?;
        }
        let from = source.open_dir(&name).map_err(|source| ProjectError::OpenSkill { skill: skill(), source })?;
        target.create_dir(&name).map_err(|source| ProjectError::MakeSkill { skill: skill(), source })?;
        let to = target.open_dir(&name).map_err(|source| ProjectError::OpenSkillInScope { skill: skill(), source })?;
        copy_tree(&name, &from, &to, &mut budget)?;
        projection.projected.push(name);
    }
    projection.projected.sort();
    projection.missing.sort();
    Ok(projection)
}

/// Copies the regular files and folders of `from` into `to`, within `budget` (files, bytes), for the
/// skill `skill`. Errors: [`ProjectError::Copy`] or [`ProjectError::TooLarge`].
fn copy_tree(
    skill: &str,
    from: &cap_std::fs::Dir,
    to: &cap_std::fs::Dir,
    budget: &mut (usize, u64),
) -> Result<(), ProjectError> {
    let failed = |source: std::io::Error| ProjectError::Copy { skill: skill.to_string(), source };
    for entry in from.entries().map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let name = entry.file_name();
        let kind = entry.file_type().map_err(failed)?;
        if kind.is_dir() {
            to.create_dir(&name).map_err(failed)?;
            let (sub_from, sub_to) = (from.open_dir(&name).map_err(failed)?, to.open_dir(&name).map_err(failed)?);
            copy_tree(skill, &sub_from, &sub_to, budget)?;
        } else if kind.is_file() {
            let size = entry.metadata().map_err(failed)?.len();
            if budget.0 == 0 || size > budget.1 {
                return Err(ProjectError::TooLarge { skill: skill.to_string() });
            }
            budget.0 -= 1;
            budget.1 -= size;
            from.copy(&name, to, &name).map_err(failed)?;
        }
    }
    Ok(())
}

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

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn projection_copies_the_named_skills_whole_and_nothing_else() {
        let library = tempfile::tempdir().expect("dir");
        write(&library.path().join("triage/SKILL.md"), "# Triage\n");
        write(&library.path().join("triage/checklists/sources.md"), "1. who wrote it\n");
        write(&library.path().join("report-writing/SKILL.md"), "# Reports\n");
        let outside = tempfile::tempdir().expect("dir");
        write(&outside.path().join("secret"), "secret");
        std::os::unix::fs::symlink(outside.path().join("secret"), library.path().join("triage/leak")).expect("link");
        let scope = tempfile::tempdir().expect("dir");
        write(&scope.path().join("triage/stale.md"), "from an older library");

        let names = ["triage".to_string(), "nope".to_string(), "../report-writing".to_string()];
        let projection = project(library.path(), Some(&names), scope.path()).expect("projects");
        assert_eq!(projection.projected, ["triage"]);
        assert_eq!(projection.missing, ["../report-writing", "nope"]);
        assert_eq!(
            std::fs::read_to_string(scope.path().join("triage/checklists/sources.md")).expect("copied"),
            "1. who wrote it\n"
        );
        assert!(!scope.path().join("triage/leak").exists(), "a symlink is not followed");
        assert!(!scope.path().join("triage/stale.md").exists(), "the skill is replaced whole");
        assert!(!scope.path().join("report-writing").exists(), "an unnamed skill is not projected");

        let all = tempfile::tempdir().expect("dir");
        let projection = project(library.path(), None, all.path()).expect("projects");
        assert_eq!(projection.projected, ["report-writing", "triage"]);
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let scope = tempfile::tempdir().expect("dir");
        let err = project(Path::new("/nonexistent/library"), None, scope.path()).expect_err("fails").to_string();
        assert!(err.contains("/nonexistent/library"), "{err}");
    }

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
