//! HTML and PDF read in a process of their own, under limits of CPU time, memory and wall time.
//!
//! The PDF and HTML parsers are large and were not written for hostile input: a document a few
//! kilobytes long has made them use gigabytes, run for hours or overflow their stack (which aborts the
//! whole process). The bounds in [`super::pdf`], [`super::pdf_forms`] and [`super::html`] close the
//! holes found; this closes the rest: the facade starts its own binary as `extract-text` for each such
//! document, which limits itself ([`limit_this_process`]) before it reads, and a reader that passes a
//! limit or dies is an unreadable document (422), never a facade that stops.
//!
//! The roles that index (`api`, `local`) call [`read_in_subprocesses`] at start; without it (the
//! library's own tests), documents are read in the calling process.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::extract::{DocumentKind, ExtractError, MAX_DOCUMENT_TEXT_BYTES, extract};

/// CPU time one reading may use, in seconds (30).
pub const READ_CPU_SECONDS: u64 = 30;
/// Address space one reading may use, in bytes (1 GiB).
pub const READ_ADDRESS_SPACE_BYTES: u64 = 1024 * 1024 * 1024;
/// Wall time one reading may take, in seconds (60), waiting for a place included.
pub const READ_WALL_SECONDS: u64 = 60;
/// Readings at once, per process (2): each may use [`READ_ADDRESS_SPACE_BYTES`].
pub const MAX_READERS: usize = 2;

/// The subcommand of this binary that reads one document.
pub const SUBCOMMAND: &str = "extract-text";

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Reads HTML and PDF documents in subprocesses of `program` (this binary) from now on.
pub fn read_in_subprocesses(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// What a reader prints: the document's kind and text, or why it could not be read.
#[derive(Serialize, Deserialize)]
pub enum Reading {
    /// The document was read.
    Read {
        /// Its kind.
        kind: DocumentKind,
        /// Its text.
        text: String,
    },
    /// It was not.
    Refused(ExtractError),
}

/// The text of the document `name` with contents `bytes`, as [`extract`] reads it: HTML and PDF in a
/// limited subprocess once [`read_in_subprocesses`] was called, the rest here.
///
/// Errors: [`ExtractError`]; a reader that passed a limit, died or printed nothing readable is
/// [`ExtractError::Unreadable`] saying which limits apply.
pub fn read(name: &str, bytes: &[u8]) -> Result<(DocumentKind, String), ExtractError> {
    let program = match (DocumentKind::of(name), PROGRAM.get()) {
        (Some(DocumentKind::Html | DocumentKind::Pdf), Some(program)) => program,
        _ => return extract(name, bytes),
    };
    let deadline = Instant::now() + Duration::from_secs(READ_WALL_SECONDS);
    let _place = Place::take(deadline)?;
    in_subprocess(program, name, bytes, deadline)
}

fn beyond_limits(what: &str) -> ExtractError {
    ExtractError::Unreadable(format!(
        "{what}; reading a document may take {READ_CPU_SECONDS} s of CPU, {} MiB of memory and {READ_WALL_SECONDS} s",
        READ_ADDRESS_SPACE_BYTES >> 20
    ))
}

fn in_subprocess(
    program: &PathBuf,
    name: &str,
    bytes: &[u8],
    deadline: Instant,
) -> Result<(DocumentKind, String), ExtractError> {
    let mut child = Command::new(program)
        // `--name=<name>`: a name that starts with `-` is the option's value, never an option.
        .args([SUBCOMMAND, &format!("--name={name}")])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| ExtractError::Unreadable(format!("the document reader cannot start: {err}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        // The text and its JSON framing: a reader printing more is cut off and answers unreadable.
        let _ = (&mut stdout).take(2 * MAX_DOCUMENT_TEXT_BYTES as u64 + 4096).read_to_end(&mut out);
        out
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    match status {
        None => Err(beyond_limits("reading the document took too long")),
        Some(status) if !status.success() => Err(beyond_limits("reading the document passed a limit")),
        Some(_) => match serde_json::from_slice::<Reading>(&out) {
            Ok(Reading::Read { kind, text }) => Ok((kind, text)),
            Ok(Reading::Refused(err)) => Err(err),
            Err(_) => Err(beyond_limits("the document reader answered nothing readable")),
        },
    }
}

/// Limits this process as a reader: [`READ_CPU_SECONDS`] of CPU, [`READ_ADDRESS_SPACE_BYTES`] of
/// address space, no core file, and first in line for the kernel's out-of-memory killer. Errors: the
/// limit that could not be set.
pub fn limit_this_process() -> std::io::Result<()> {
    let set = |resource, value: u64| {
        let limit = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(resource, &limit) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    };
    set(libc::RLIMIT_CPU, READ_CPU_SECONDS)?;
    set(libc::RLIMIT_AS, READ_ADDRESS_SPACE_BYTES)?;
    set(libc::RLIMIT_CORE, 0)?;
    // Best effort: where /proc is read-only the limits above still hold.
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    Ok(())
}

/// A place among the [`MAX_READERS`] readings of this process.
struct Place;

static READERS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

impl Place {
    /// Waits for a place until `deadline`. Errors: [`ExtractError::Unreadable`] when none came.
    fn take(deadline: Instant) -> Result<Self, ExtractError> {
        let (count, freed) = &READERS;
        let mut count = count.lock().unwrap_or_else(|e| e.into_inner());
        while *count >= MAX_READERS {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(beyond_limits("other documents were being read for too long"));
            }
            count = freed.wait_timeout(count, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *count += 1;
        Ok(Self)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let (count, freed) = &READERS;
        *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        freed.notify_one();
    }
}
