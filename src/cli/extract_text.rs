//! `yuxi-operator extract-text --name <name>`: reads one document from stdin and prints its text as
//! JSON on stdout, under the reader's limits. The facade starts it for each HTML or PDF document it
//! indexes (`yuxi_operator::knowledge::isolated`); it is not meant to be run by hand.

use std::io::{Read, Write};
use std::process::ExitCode;

use yuxi_operator::knowledge::extract::{MAX_DOCUMENT_BYTES, extract};
use yuxi_operator::knowledge::isolated::{Reading, limit_this_process};

/// The document's name, whose extension gives its kind.
#[derive(clap::Args)]
pub struct ExtractTextArgs {
    /// The document's name (`report.pdf`).
    #[arg(long)]
    name: String,
}

/// Limits this process, reads stdin (at most one byte more than a document may have), and prints a
/// [`Reading`]. Exit status 1 when the limits cannot be set or stdin cannot be read.
pub fn run(args: ExtractTextArgs) -> ExitCode {
    if let Err(err) = limit_this_process() {
        eprintln!("error: cannot limit the reader: {err}");
        return ExitCode::FAILURE;
    }
    let mut bytes = Vec::new();
    if let Err(err) = std::io::stdin().lock().take(MAX_DOCUMENT_BYTES as u64 + 1).read_to_end(&mut bytes) {
        eprintln!("error: cannot read the document from stdin: {err}");
        return ExitCode::FAILURE;
    }
    let reading = match extract(&args.name, &bytes) {
        Ok((kind, text)) => Reading::Read { kind, text },
        Err(err) => Reading::Refused(err),
    };
    let json = serde_json::to_vec(&reading).expect("a reading serializes");
    match std::io::stdout().lock().write_all(&json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// Has the facade read HTML and PDF documents in limited subprocesses of this binary. Errors: this
/// binary's path cannot be known (a facade that cannot confine the parsers does not start).
pub fn read_documents_in_subprocesses() -> anyhow::Result<()> {
    let exe = std::env::current_exe()
        .map_err(|err| anyhow::anyhow!("cannot find this binary to read documents in subprocesses: {err}"))?;
    yuxi_operator::knowledge::isolated::read_in_subprocesses(exe);
    Ok(())
}
