//! A manifests folder followed as it changes, as the local mode follows its `--manifests`: each round
//! reads every file again and puts in force each file's new version when it is valid among the others,
//! and its last good version otherwise (none for a file that never was valid), as an API server keeps
//! the stored object when a write is refused. A deleted file's objects go.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Checked, Document, Loaded, Surroundings, check_documents, read_documents};
use crate::resources::manifest::Manifest;

/// A file whose new version was not put in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FileProblem {
    /// The file.
    pub file: String,
    /// What is wrong with it, `origin: field: message` each (at most [`MAX_PROBLEM_LINES`]).
    pub errors: Vec<String>,
    /// Whether an earlier version of the file is in force instead (`false`: none of its objects is).
    pub last_good_in_force: bool,
}

/// The most error lines one [`FileProblem`] keeps.
pub const MAX_PROBLEM_LINES: usize = 20;

/// What one round put in force.
#[derive(Clone, Debug, Default)]
pub struct Round {
    /// The objects in force now.
    pub loaded: Loaded,
    /// The files whose current version is not in force, by file name.
    pub problems: Vec<FileProblem>,
}

/// The last good version of each file of a folder.
#[derive(Debug, Default)]
pub struct Followed {
    good: BTreeMap<PathBuf, Vec<Manifest>>,
}

impl Followed {
    /// Starts following with `files` as they are now: every document must be valid (the local mode will
    /// not start on a broken folder). Errors: every problem, as `origin: field: message` lines.
    pub fn start(files: &[PathBuf], around: &Surroundings) -> Result<(Self, Loaded), Vec<String>> {
        let documents = super::valid_documents(files, around)?;
        let mut good: BTreeMap<PathBuf, Vec<Manifest>> = files.iter().map(|f| (f.clone(), Vec::new())).collect();
        for document in &documents {
            if let Ok(manifest) = &document.parsed {
                good.entry(document.file.clone()).or_default().push(manifest.clone());
            }
        }
        Ok((Self { good }, Loaded::from_documents(&documents)))
    }

    /// Reads `files` (the folder's files now) and puts in force every file whose new version is valid
    /// among what is in force; a file that is not keeps its last good version, or none, and a deleted
    /// file's objects go. A new version is judged by its own findings alone: when the new versions
    /// together do not all pass, each is tried in turn (by file name) against what is in force with the
    /// earlier ones accepted, so a broken file never holds back a valid one, and an unchanged file that
    /// no longer resolves (a knowledge base it names was deleted) stays in force and is reported.
    pub fn update(&mut self, files: &[PathBuf], around: &Surroundings) -> Round {
        let mut fresh: BTreeMap<PathBuf, Vec<Document>> = files.iter().map(|f| (f.clone(), Vec::new())).collect();
        for document in read_documents(files) {
            fresh.entry(document.file.clone()).or_default().push(document);
        }
        // The files whose content changed (a new file, or one that cannot be read, included).
        let changed: Vec<PathBuf> =
            fresh.iter().filter(|(file, documents)| !self.unchanged(file, documents)).map(|(f, _)| f.clone()).collect();
        // Each file's version in force while judging: the last good one, or the new one once accepted.
        let mut accepted: BTreeSet<PathBuf> = BTreeSet::new();
        let mut refused: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
        let all: BTreeSet<PathBuf> = changed.iter().cloned().collect();
        let together = self.world(&fresh, &all);
        let failing = failing_files(&together, &check_documents(&together, around));
        if changed.iter().all(|file| !failing.contains_key(file)) {
            accepted = all;
        } else {
            for file in &changed {
                let mut trying = accepted.clone();
                trying.insert(file.clone());
                let documents = self.world(&fresh, &trying);
                match failing_files(&documents, &check_documents(&documents, around)).remove(file) {
                    None => {
                        accepted.insert(file.clone());
                    }
                    Some(errors) => {
                        refused.insert(file.clone(), errors);
                    }
                }
            }
        }
        let documents = self.world(&fresh, &accepted);
        let still = failing_files(&documents, &check_documents(&documents, around));
        let mut problems = Vec::new();
        let mut reported: BTreeSet<PathBuf> = refused.keys().cloned().collect();
        reported.extend(still.keys().cloned());
        for file in reported {
            let mut errors = refused.get(&file).cloned().unwrap_or_default();
            for line in still.get(&file).into_iter().flatten() {
                if !errors.contains(line) {
                    errors.push(line.clone());
                }
            }
            errors.truncate(MAX_PROBLEM_LINES);
            for line in &mut errors {
                bound_line(line);
            }
            let last_good_in_force = self.good.get(&file).is_some_and(|good| !good.is_empty());
            problems.push(FileProblem { file: file.display().to_string(), errors, last_good_in_force });
        }
        let loaded = Loaded::from_documents(&documents);
        let mut good: BTreeMap<PathBuf, Vec<Manifest>> = BTreeMap::new();
        for file in fresh.keys() {
            let kept = match accepted.contains(file) {
                true => fresh[file].iter().filter_map(|d| d.parsed.as_ref().ok().cloned()).collect(),
                false => self.good.get(file).cloned().unwrap_or_default(),
            };
            good.insert(file.clone(), kept);
        }
        self.good = good;
        Round { loaded, problems }
    }

    /// Whether `documents`, the file's new reading, are its last good version.
    fn unchanged(&self, file: &Path, documents: &[Document]) -> bool {
        let Some(good) = self.good.get(file) else { return false };
        let parsed: Option<Vec<&Manifest>> = documents.iter().map(|d| d.parsed.as_ref().ok()).collect();
        parsed.is_some_and(|parsed| {
            parsed.len() == good.len()
                && parsed
                    .iter()
                    .zip(good)
                    .all(|(new, old)| serde_json::to_value(new).ok() == serde_json::to_value(old).ok())
        })
    }

    /// The documents of every file: its new version when it is in `new`, else its last good one (none
    /// for a file never good).
    fn world(&self, fresh: &BTreeMap<PathBuf, Vec<Document>>, new: &BTreeSet<PathBuf>) -> Vec<Document> {
        let mut documents = Vec::new();
        for (file, read) in fresh {
            if new.contains(file) {
                documents.extend(read.iter().map(|d| Document {
                    file: d.file.clone(),
                    origin: d.origin.clone(),
                    parsed: match &d.parsed {
                        Ok(manifest) => Ok(manifest.clone()),
                        Err(err) => Err(err.duplicate()),
                    },
                }));
            } else {
                let good = self.good.get(file).map(Vec::as_slice).unwrap_or_default();
                documents.extend(good.iter().enumerate().map(|(i, manifest)| Document {
                    file: file.clone(),
                    origin: super::origin(file, (good.len() > 1).then_some(i + 1)),
                    parsed: Ok(manifest.clone()),
                }));
            }
        }
        documents
    }
}

/// The longest error line a [`FileProblem`] keeps, in bytes; a longer one is cut and says so.
pub const MAX_LINE_BYTES: usize = 2048;

/// Cuts `line` to [`MAX_LINE_BYTES`] at a character boundary.
fn bound_line(line: &mut String) {
    if line.len() > MAX_LINE_BYTES {
        let mut end = MAX_LINE_BYTES;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push_str(" …(cut)");
    }
}

/// The files some of whose documents have errors, each with its error lines.
fn failing_files(documents: &[Document], checked: &[Checked]) -> BTreeMap<PathBuf, Vec<String>> {
    let file_of: BTreeMap<&str, &Path> = documents.iter().map(|d| (d.origin.as_str(), d.file.as_path())).collect();
    let mut failing: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for item in checked.iter().filter(|c| !c.report.is_ok()) {
        let Some(file) = file_of.get(item.origin.as_str()) else { continue };
        let lines = item.report.errors.iter().map(|e| format!("{}: {e}", item.origin));
        failing.entry(file.to_path_buf()).or_default().extend(lines);
    }
    failing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(slug: &str, extra: &str) -> String {
        format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: ChatbotAgent\n  description: {extra}\n{}",
            if extra.contains("default") { "  default: true\n" } else { "" }
        )
    }

    struct Folder(tempfile::TempDir);

    impl Folder {
        fn new(files: &[(&str, String)]) -> Self {
            let folder = Folder(tempfile::tempdir().expect("dir"));
            for (name, text) in files {
                folder.write(name, text);
            }
            folder
        }

        fn write(&self, name: &str, text: &str) {
            std::fs::write(self.0.path().join(name), text).expect("write");
        }

        fn files(&self) -> Vec<PathBuf> {
            super::super::manifest_files(&[self.0.path().to_path_buf()]).expect("files")
        }
    }

    fn descriptions(round: &Round) -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = round
            .loaded
            .agents
            .iter()
            .map(|a| (kube::ResourceExt::name_any(a), a.spec.description.clone().unwrap_or_default()))
            .collect();
        found.sort();
        found
    }

    fn problem_files(round: &Round) -> Vec<String> {
        round.problems.iter().map(|p| Path::new(&p.file).file_name().unwrap().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn a_broken_file_never_holds_back_a_valid_change_of_another() {
        let folder = Folder::new(&[("a.yaml", agent("a", "default one")), ("b.yaml", agent("b", "plain"))]);
        let around = Surroundings::default();
        let (mut followed, _) = Followed::start(&folder.files(), &around).expect("valid");
        // b claims the default too: refused, and a (unchanged, accused by b's claim) stays as it is.
        folder.write("b.yaml", &agent("b", "default two"));
        let round = followed.update(&folder.files(), &around);
        assert_eq!(problem_files(&round), ["b.yaml"], "{:?}", round.problems);
        assert!(round.problems[0].last_good_in_force);
        assert_eq!(descriptions(&round), [("a".into(), "default one".into()), ("b".into(), "plain".into())]);
        // a changes while b is still broken: a's change is put in force.
        folder.write("a.yaml", &agent("a", "default one, edited"));
        let round = followed.update(&folder.files(), &around);
        assert_eq!(problem_files(&round), ["b.yaml"], "{:?}", round.problems);
        assert_eq!(descriptions(&round)[0], ("a".into(), "default one, edited".into()));
    }

    #[test]
    fn two_files_of_one_agent_are_refused_and_the_first_stays() {
        let folder = Folder::new(&[("a.yaml", agent("a", "first"))]);
        let around = Surroundings::default();
        let (mut followed, _) = Followed::start(&folder.files(), &around).expect("valid");
        folder.write("z.yaml", &agent("a", "second"));
        let round = followed.update(&folder.files(), &around);
        assert_eq!(problem_files(&round), ["z.yaml"]);
        assert!(round.problems[0].errors[0].contains("declared twice"), "{:?}", round.problems);
        assert!(!round.problems[0].last_good_in_force);
        assert_eq!(descriptions(&round), [("a".into(), "first".into())]);
    }

    #[test]
    fn a_manifest_cannot_take_the_slug_or_the_default_of_an_agent_made_through_the_api() {
        let folder = Folder::new(&[("a.yaml", agent("a", "first"))]);
        let mut made: crate::resources::Agent =
            serde_norway::from_str(&agent("mine", "default made through the api")).expect("agent");
        made.metadata.name = Some("mine".into());
        let around = Surroundings { agents: vec![made], ..Surroundings::default() };
        let (mut followed, _) = Followed::start(&folder.files(), &around).expect("valid");
        folder.write("b.yaml", &agent("mine", "taken"));
        folder.write("c.yaml", &agent("c", "default too"));
        let round = followed.update(&folder.files(), &around);
        assert_eq!(problem_files(&round), ["b.yaml", "c.yaml"], "{:?}", round.problems);
        assert!(round.problems[0].errors[0].contains("created through the API"), "{:?}", round.problems[0]);
        assert!(round.problems[1].errors[0].contains("spec.default"), "{:?}", round.problems[1]);
    }

    #[test]
    fn an_error_line_is_cut_to_its_bound() {
        let mut line = "é".repeat(MAX_LINE_BYTES);
        bound_line(&mut line);
        assert!(line.len() <= MAX_LINE_BYTES + " …(cut)".len() && line.ends_with("…(cut)"));
    }
}
