//! The `yuxi-operator` command line: one binary, one subcommand per role. Each subcommand's arguments and
//! start-up live in its own file under `cli/`; this file only parses and dispatches.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The allocator: mimalloc, whose per-thread free lists serve a server's many small, short-lived
/// allocations (request bodies, JSON values, event envelopes) at a fraction of the system allocator's
/// cost, and return freed pages to the system, so memory falls back after a burst.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "yuxi-operator",
    version,
    about = "Runs LLM agents and subagents declared as Kubernetes custom resources"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of Agent, AgentRun and KnowledgeBase as YAML.
    Crd(cli::crd::CrdArgs),
    /// Read a password from stdin and print its argon2 hash, for a local users file's `password_hash`.
    HashPassword(cli::hash_password::HashPasswordArgs),
    /// Check Agent, AgentRun and KnowledgeBase manifests (files, or folders of .yaml files) by the admission rules.
    Validate(cli::validate::ValidateArgs),
    /// Serve the admission webhook (AdmissionReview v1 over TLS).
    Webhook(cli::webhook::WebhookArgs),
    /// Run the system on this machine without a cluster: the facade over the Agent manifests of a folder.
    Local(cli::local::LocalArgs),
    /// Serve the facade in a cluster: the Agents of one namespace, TokenReview authentication, runs as
    /// AgentRuns, run state in Redis.
    Api(cli::api::ApiArgs),
    /// Run the reconcilers, leader-elected: AgentRuns into sandbox pods and back into phases, Agents'
    /// conditions; `/metrics`, `/healthz` and `/readyz` on `--listen`.
    Controller(cli::controller::ControllerArgs),
    /// Execute one AgentRun to a terminal state (what runs in a sandbox pod's `runner` container).
    Runner(cli::runner::RunnerArgs),
    /// Print the sandbox pod (and, after `---`, the Secret of its inputs) an AgentRun would get.
    SandboxPod(cli::sandbox_pod::SandboxPodArgs),
    /// Serve the `execute` tool's commands on a Unix socket (a sandbox pod's `sandbox` container).
    SandboxExec(cli::sandbox_exec::SandboxExecArgs),
    /// Read one document from stdin into text, under limits (started by the facade for each HTML or
    /// PDF document it indexes).
    #[command(hide = true)]
    ExtractText(cli::extract_text::ExtractTextArgs),
}

fn main() -> ExitCode {
    // Before anything else: a runner holds the model key and the run's credentials in its environment.
    if std::env::args_os().nth(1).is_some_and(|role| role == "runner") {
        cli::runner::forbid_inspection();
    }
    // What a dropped dictionary held goes back to the system, not to the allocator's free lists.
    yuxi_operator::knowledge::held::on_release(cli::memory::return_freed_memory);
    let command = Cli::parse().command;
    // Flushes the spans left to export when dropped, as `main` returns.
    let _telemetry = cli::telemetry::init(match &command {
        Command::Local(_) => "local",
        Command::Api(_) => "api",
        Command::Controller(_) => "controller",
        Command::Runner(_) => "runner",
        Command::Webhook(_) => "webhook",
        _ => "cli",
    });
    match command {
        Command::Crd(args) => cli::crd::run(args),
        Command::HashPassword(args) => cli::hash_password::run(args),
        Command::Validate(args) => cli::validate::run(args),
        Command::Webhook(args) => cli::webhook::run(args),
        Command::Local(args) => cli::local::run(args),
        Command::Api(args) => cli::api::run(args),
        Command::Controller(args) => cli::controller::run(args),
        Command::Runner(args) => cli::runner::run(args),
        Command::SandboxPod(args) => cli::sandbox_pod::run(args),
        Command::SandboxExec(args) => cli::sandbox_exec::run(args),
        Command::ExtractText(args) => cli::extract_text::run(args),
    }
}
