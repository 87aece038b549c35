//! The README's tour, its shell blocks pasted in order into one shell as a reader pastes them, against
//! the local mode started as `make run` starts it: every line runs and prints what the prose says.

use std::time::Duration;

use tempfile::TempDir;

use crate::support::local_mode::{LocalStore, start_as_user};
use crate::support::repository::root;

/// The `sh` blocks of the README between `## A five-minute tour` and the next section, in order.
fn tour_blocks(readme: &str) -> Vec<String> {
    let start = readme.find("\n## A five-minute tour").expect("the README has a tour");
    let rest = &readme[start + 1..];
    let tour = &rest[..rest[3..].find("\n## ").map_or(rest.len(), |end| end + 3)];
    let mut blocks = Vec::new();
    let mut lines = tour.lines();
    while let Some(line) = lines.next() {
        if line.trim_end() == "```sh" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim_end() != "```").collect();
            blocks.push(block.join("\n"));
        }
    }
    blocks
}

#[tokio::test]
async fn the_readme_tour_runs_as_pasted_and_prints_what_it_says() {
    let local = start_as_user(TempDir::new().expect("dir"), LocalStore::InProcess).await;
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let blocks = tour_blocks(&readme);
    assert!(blocks.len() >= 8, "the tour's shell blocks: {blocks:?}");
    // The reader's clone: `.run/data` is the data folder of the local mode `make run` starts.
    let clone = TempDir::new().expect("dir");
    std::fs::create_dir(clone.path().join(".run")).expect(".run");
    std::os::unix::fs::symlink(local.data.path(), clone.path().join(".run/data")).expect("link");
    let script = format!("set -eo pipefail\n{}\n", blocks.join("\n")).replace("http://127.0.0.1:8080", &local.base);
    let run = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(clone.path())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), run).await.expect("the tour ends").expect("bash");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the tour failed ({}):\n{out}\n{err}", output.status);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..5],
        [
            "deep-research ChatbotAgent",
            "fact-verifier SubAgentBackend",
            "general-purpose SubAgentBackend",
            "note-taker ChatbotAgent",
            "research-explorer SubAgentBackend"
        ],
        "{out}"
    );
    assert_eq!(lines[5], "notes-helper", "{out}");
    assert!(lines[6].starts_with(r#"{"code":"not_found""#), "Bob is told it does not exist: {out}");
    assert!(out.contains("event: end") && out.contains(r#""status":"completed""#), "{out}");
    assert!(out.contains("# Research report") && out.contains("research-notes: solid-electrolytes.md"), "{out}");
    let tree: Vec<&&str> = lines.iter().filter(|l| l.contains(" started by ")).collect();
    assert_eq!(tree.len(), 3, "the parent and its two children: {out}");
    assert_eq!(tree.iter().filter(|l| l.contains(" started by None ")).count(), 1, "{out}");
    assert!(out.contains(r#"{"results":[{"knowledge_base":"research-notes","document":"solid-electrolytes.md""#));
    assert!(lines.contains(&"waiting [('call_0_0', 'write_file')]"), "{out}");
    assert!(lines.contains(&"pending"), "{out}");
    assert!(lines.contains(&"Order more LLZO."), "the approved note is written: {out}");
    assert!(out.contains(r#"{"status":"completed","run_id":"#), "subagent_await: {out}");
    assert!(out.contains("Check: LLZO conducts lithium ions."), "task's content: {out}");
    assert_eq!(lines.last(), Some(&"204"), "{out}");
}
