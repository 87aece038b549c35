//! HTML and PDF read in a process of their own, under limits of CPU time, memory and wall time.
//!
//! The PDF and HTML parsers are large and were not written for hostile input: a document a few
//! kilobytes long has made them use gigabytes, run for hours or overflow their stack (which aborts the
//! whole process). The bounds in [`super::pdf`], [`super::pdf_forms`] and [`super::html`] close the
//! holes found; this closes the rest: the facade starts its own binary as `extract-text` for each such
//! document, which limits itself ([`limit_this_process`]) before it reads, and a reader that passes a
//! limit or dies is an unreadable document (422), never a facade that stops.
//!
//! The places to read are shared fairly ([`Places`]): each reader (a user; the sources the facade
//! syncs are one reader of their own) holds at most [`MAX_PLACES_PER_READER`] of the
//! [`MAX_READERS`] at once and waits in line with at most [`MAX_WAITING_PER_READER`] documents, so
//! one user's slow documents never hold another's.
//!
//! The roles that index (`api`, `local`) call [`read_in_subprocesses`] at start; without it (the
//! library's own tests), documents are read in the calling process.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Condvar, LazyLock, Mutex, OnceLock};
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
/// Readings at once of one reader (a user) (1): another user always finds a place unless two others
/// read.
pub const MAX_PLACES_PER_READER: usize = 1;
/// Documents of one reader waiting for a place (4); one more is refused at once
/// ([`ExtractError::ReadersBusy`]).
pub const MAX_WAITING_PER_READER: usize = 4;

/// Who a reading is for, to share the places fairly: the uploading user's id, or
/// [`SOURCES_READER`].
pub type ReaderKey<'a> = &'a str;

/// The reader of the documents the facade syncs from folders and ConfigMaps.
pub const SOURCES_READER: &str = "";

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

/// The text of the document `name` with contents `bytes`, read for `reader`, as [`extract`] reads it:
/// HTML and PDF in a limited subprocess, at one of the process's [`Places`], once
/// [`read_in_subprocesses`] was called; the rest here.
///
/// Errors: [`ExtractError`]; a reader that passed a limit, died or printed nothing readable, or no
/// place within [`READ_WALL_SECONDS`], is [`ExtractError::Unreadable`] saying which limits apply;
/// [`ExtractError::ReadersBusy`] when `reader` has [`MAX_WAITING_PER_READER`] documents waiting.
pub fn read(reader: ReaderKey<'_>, name: &str, bytes: &[u8]) -> Result<(DocumentKind, String), ExtractError> {
    let program = match (DocumentKind::of(name), PROGRAM.get()) {
        (Some(DocumentKind::Html | DocumentKind::Pdf), Some(program)) => program,
        _ => return extract(name, bytes),
    };
    let deadline = Instant::now() + Duration::from_secs(READ_WALL_SECONDS);
    let _place = PLACES.take(reader, deadline)?;
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

/// The places to read of one process, shared fairly between readers: at most [`MAX_READERS`] at
/// once, [`MAX_PLACES_PER_READER`] of them one reader's, and at most [`MAX_WAITING_PER_READER`]
/// documents of one reader in line. A free place goes to the earliest in line whose reader may take
/// one, so a reader with nothing being read passes another's queued documents.
pub struct Places {
    state: Mutex<PlacesState>,
    freed: Condvar,
    total: usize,
    per_reader: usize,
    waiting_per_reader: usize,
}

#[derive(Default)]
struct PlacesState {
    /// Places taken, by reader.
    taken: HashMap<String, usize>,
    /// The documents in line, earliest first: their ticket and reader.
    line: VecDeque<(u64, String)>,
    next_ticket: u64,
}

impl PlacesState {
    fn taken_total(&self) -> usize {
        self.taken.values().sum()
    }

    /// Whether `ticket` is the earliest in line whose reader may take a place now.
    fn turn_of(&self, ticket: u64, total: usize, per_reader: usize) -> bool {
        if self.taken_total() >= total {
            return false;
        }
        let may = |reader: &str| self.taken.get(reader).copied().unwrap_or(0) < per_reader;
        self.line.iter().find(|(_, reader)| may(reader)).is_some_and(|(first, _)| *first == ticket)
    }
}

static PLACES: LazyLock<Places> =
    LazyLock::new(|| Places::new(MAX_READERS, MAX_PLACES_PER_READER, MAX_WAITING_PER_READER));

impl Places {
    /// Places: `total` at once, `per_reader` of them one reader's, `waiting_per_reader` of one reader's
    /// documents in line.
    pub fn new(total: usize, per_reader: usize, waiting_per_reader: usize) -> Places {
        Places { state: Mutex::default(), freed: Condvar::new(), total, per_reader, waiting_per_reader }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlacesState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits in line for a place of `reader` until `deadline`.
    ///
    /// Errors: [`ExtractError::ReadersBusy`] at once when `reader` has `waiting_per_reader` documents
    /// in line; [`ExtractError::Unreadable`] when no place came by `deadline`.
    pub fn take(&self, reader: ReaderKey<'_>, deadline: Instant) -> Result<Place<'_>, ExtractError> {
        let mut state = self.lock();
        if state.line.iter().filter(|(_, r)| r == reader).count() >= self.waiting_per_reader {
            return Err(ExtractError::ReadersBusy);
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.line.push_back((ticket, reader.to_string()));
        while !state.turn_of(ticket, self.total, self.per_reader) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                state.line.retain(|(t, _)| *t != ticket);
                drop(state);
                // Another in line may be first now.
                self.freed.notify_all();
                return Err(beyond_limits("other documents were being read for too long"));
            }
            state = self.freed.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        state.line.retain(|(t, _)| *t != ticket);
        *state.taken.entry(reader.to_string()).or_default() += 1;
        drop(state);
        // The next in line may have a place too.
        self.freed.notify_all();
        Ok(Place { places: self, reader: reader.to_string() })
    }

    /// `(places taken, documents in line)` now.
    pub fn held(&self) -> (usize, usize) {
        let state = self.lock();
        (state.taken_total(), state.line.len())
    }
}

/// A place taken among [`Places`]; given back when dropped.
pub struct Place<'a> {
    places: &'a Places,
    reader: String,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut state = self.places.lock();
        if let Some(count) = state.taken.get_mut(&self.reader) {
            *count -= 1;
            if *count == 0 {
                state.taken.remove(&self.reader);
            }
        }
        drop(state);
        self.places.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until `places` holds `held` (at most 10 s).
    fn until_held(places: &Places, held: (usize, usize)) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while places.held() != held {
            assert!(Instant::now() < deadline, "held {:?}, not {held:?}", places.held());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_reader_with_documents_in_line_never_holds_another_readers_place_and_its_line_is_bounded() {
        let places = Places::new(2, 1, 4);
        let alice = places.take("alice", Instant::now()).expect("a free place");
        std::thread::scope(|scope| {
            // Four more of Alice's documents wait in line: the second place is not hers while she
            // reads one.
            let waiting: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| places.take("alice", Instant::now() + Duration::from_secs(30)).map(drop)))
                .collect();
            until_held(&places, (1, 4));
            assert!(matches!(places.take("alice", Instant::now()), Err(ExtractError::ReadersBusy)), "her line is full");
            // Bob comes after them all and reads at once, without waiting.
            let bob = places.take("bob", Instant::now()).expect("Bob's place, at once");
            assert_eq!(places.held(), (2, 4));
            drop((alice, bob));
            for reading in waiting {
                reading.join().expect("joins").expect("each of Alice's documents is read in turn");
            }
        });
        assert_eq!(places.held(), (0, 0));
    }

    #[test]
    fn a_lone_reader_waits_for_its_own_place_and_gives_up_at_its_deadline() {
        let places = Places::new(2, 1, 4);
        let first = places.take("alice", Instant::now()).expect("a free place");
        let late = places.take("alice", Instant::now() + Duration::from_millis(50));
        assert!(matches!(late, Err(ExtractError::Unreadable(_))), "no second place for one reader");
        assert_eq!(places.held(), (1, 0), "a reader that gave up leaves the line");
        drop(first);
        places.take("alice", Instant::now()).expect("her place again");
    }
}
