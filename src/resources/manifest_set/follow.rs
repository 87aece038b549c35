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
        let documents = read_documents(files);
        let problems: Vec<String> = check_documents(&documents, around)
            .iter()
            .flat_map(|item| item.report.errors.iter().map(move |error| format!("{}: {error}", item.origin)))
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut good: BTreeMap<PathBuf, Vec<Manifest>> = files.iter().map(|f| (f.clone(), Vec::new())).collect();
        for document in &documents {
            if let Ok(manifest) = &document.parsed {
                good.entry(document.file.clone()).or_default().push(manifest.clone());
            }
        }
        Ok((Self { good }, Loaded::from_documents(&documents)))
    }

    /// Reads `files` (the folder's files now) and puts in force every file whose new version is valid
    /// among the others; a file that is not keeps its last good version, or none. A file that fails is
    /// set back and the rest judged again, until no other file fails, so one broken file never takes a
    /// valid one down with it, and a file still valid after another's change keeps up with it.
    pub fn update(&mut self, files: &[PathBuf], around: &Surroundings) -> Round {
        let mut fresh: BTreeMap<PathBuf, Vec<Document>> = BTreeMap::new();
        for document in read_documents(files) {
            fresh.entry(document.file.clone()).or_default().push(document);
        }
        for file in files {
            fresh.entry(file.clone()).or_default();
        }
        // The files set back to their last good version, with the errors of the version refused.
        let mut set_back: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
        let (documents, checked) = loop {
            let documents = self.world(&fresh, &set_back);
            let checked = check_documents(&documents, around);
            let failing = failing_files(&documents, &checked);
            let newly: Vec<PathBuf> = failing.into_keys().filter(|f| !set_back.contains_key(f)).collect();
            if newly.is_empty() {
                break (documents, checked);
            }
            let failing = failing_files(&documents, &checked);
            for file in newly {
                set_back.insert(file.clone(), failing[&file].clone());
            }
        };
        // What is still wrong with what is in force (a last good version that no longer resolves).
        let still = failing_files(&documents, &checked);
        let mut problems = Vec::new();
        for (file, mut errors) in set_back.clone() {
            for line in still.get(&file).into_iter().flatten() {
                if !errors.contains(line) {
                    errors.push(line.clone());
                }
            }
            errors.truncate(MAX_PROBLEM_LINES);
            let last_good_in_force = self.good.get(&file).is_some_and(|good| !good.is_empty());
            problems.push(FileProblem { file: file.display().to_string(), errors, last_good_in_force });
        }
        let loaded = Loaded::from_documents(&documents);
        let mut good: BTreeMap<PathBuf, Vec<Manifest>> = BTreeMap::new();
        for file in fresh.keys() {
            let kept = match set_back.contains_key(file) {
                true => self.good.get(file).cloned().unwrap_or_default(),
                false => fresh[file].iter().filter_map(|d| d.parsed.as_ref().ok().cloned()).collect(),
            };
            good.insert(file.clone(), kept);
        }
        self.good = good;
        Round { loaded, problems }
    }

    /// The documents in force: each file's new version, or its last good one when it is set back.
    fn world(
        &self,
        fresh: &BTreeMap<PathBuf, Vec<Document>>,
        set_back: &BTreeMap<PathBuf, Vec<String>>,
    ) -> Vec<Document> {
        let mut documents = Vec::new();
        for (file, new) in fresh {
            if set_back.contains_key(file) {
                let good = self.good.get(file).map(Vec::as_slice).unwrap_or_default();
                documents.extend(good.iter().enumerate().map(|(i, manifest)| Document {
                    file: file.clone(),
                    origin: super::origin(file, (good.len() > 1).then_some(i + 1)),
                    parsed: Ok(manifest.clone()),
                }));
            } else {
                documents.extend(new.iter().map(|d| Document {
                    file: d.file.clone(),
                    origin: d.origin.clone(),
                    parsed: match &d.parsed {
                        Ok(manifest) => Ok(manifest.clone()),
                        Err(err) => Err(err.duplicate()),
                    },
                }));
            }
        }
        documents
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

/// The files in `problems`, as a set.
pub fn problem_files(problems: &[FileProblem]) -> BTreeSet<&str> {
    problems.iter().map(|p| p.file.as_str()).collect()
}
