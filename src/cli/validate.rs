//! `yuxi-operator validate`: checks manifests by the admission rules, offline, and lists the verdicts.

use std::path::PathBuf;
use std::process::ExitCode;

use yuxi_operator::resources::manifest_set;
use yuxi_operator::resources::validation::Severity;

/// What to check.
#[derive(clap::Args)]
pub struct ValidateArgs {
    /// Manifest files or folders.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// The skills library (folders with a SKILL.md) the Agents' skills must be in; without it, skills
    /// are not checked.
    #[arg(long, value_name = "DIR")]
    skills_library: Option<PathBuf>,
    /// Report an Agent's names of objects that are not among the files (knowledge bases, skills, Models,
    /// MCP servers, subagents) as warnings, not errors: for files applied beside objects kept elsewhere.
    #[arg(long)]
    references_elsewhere: bool,
}

/// Lists one verdict per object on stdout (`ok`, `rejected` with its errors, `skipped` for other kinds),
/// warnings included. The files are taken as the whole set: an Agent naming a knowledge base, Model, MCP
/// server or subagent not among them is rejected (a warning with `--references-elsewhere`), and one
/// naming a skill not in `--skills-library` when it is given. Exit status 1 when an object is rejected, when no Agent, AgentRun, KnowledgeBase or Model is
/// found, or when a path (the skills library among them) cannot be read; 0 otherwise.
pub fn run(args: ValidateArgs) -> ExitCode {
    let paths = &args.paths;
    let files = match manifest_set::manifest_files(paths) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(library) = args.skills_library.as_deref().filter(|library| !library.is_dir()) {
        eprintln!("error: --skills-library {}: not a folder", library.display());
        return ExitCode::FAILURE;
    }
    let around = manifest_set::Surroundings {
        severity: match args.references_elsewhere {
            true => Severity::Warn,
            false => Severity::Refuse,
        },
        skills: args.skills_library.as_deref().map(manifest_set::library_skills),
        ..Default::default()
    };
    let checked = manifest_set::check_files(&files, &around);
    let mut out = String::new();
    let mut failed = 0;
    for item in &checked {
        let object = item.object.as_deref().unwrap_or("not decoded");
        let verdict = match (item.skipped, item.report.is_ok()) {
            (true, _) => "skipped ",
            (false, true) => "ok      ",
            (false, false) => {
                failed += 1;
                "rejected"
            }
        };
        out.push_str(&format!("{verdict} {} ({object})\n", item.origin));
        for error in &item.report.errors {
            out.push_str(&format!("  error:   {error}\n"));
        }
        for warning in &item.report.warnings {
            out.push_str(&format!("  warning: {warning}\n"));
        }
    }
    let checked_objects = checked.iter().filter(|c| !c.skipped).count();
    // A closed pipe (`| head`) or a full disk ends the listing, not the process.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    if checked_objects == 0 {
        eprintln!(
            "error: no Agent, AgentRun, KnowledgeBase or Model manifests found in {}",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
        return ExitCode::FAILURE;
    }
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
