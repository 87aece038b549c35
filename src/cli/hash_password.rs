//! `yuxi-operator hash-password`: reads a password from stdin and prints its argon2id hash, the
//! `password_hash` of a local users file entry (docs/reference/cli.md).

use std::io::Read;
use std::process::ExitCode;

use yuxi_operator::facade::http::auth::hash_password;

/// The shortest password accepted, in characters (Yuxi's own minimum).
const MIN_PASSWORD_CHARS: usize = 8;
/// The longest password read, in bytes (the login form's bound).
const MAX_PASSWORD_BYTES: usize = yuxi_operator::facade::features::account::login::MAX_PASSWORD_BYTES;

/// No arguments: the password comes on stdin, so it shows in no process list or shell history.
#[derive(clap::Args)]
pub struct HashPasswordArgs {}

/// Reads stdin up to its end or its first newline (which is not part of the password) and prints the
/// hash on stdout. Exit status 1, with the reason on stderr, when stdin cannot be read, or the password
/// is shorter than 8 characters or longer than 1024 bytes.
pub fn run(_args: HashPasswordArgs) -> ExitCode {
    let mut input = Vec::new();
    if let Err(err) = std::io::stdin().lock().take(MAX_PASSWORD_BYTES as u64 + 2).read_to_end(&mut input) {
        eprintln!("error: cannot read the password from stdin: {err}");
        return ExitCode::FAILURE;
    }
    let Ok(text) = String::from_utf8(input) else {
        eprintln!("error: the password is not UTF-8");
        return ExitCode::FAILURE;
    };
    let password = text.split('\n').next().unwrap_or_default().trim_end_matches('\r');
    if password.chars().count() < MIN_PASSWORD_CHARS {
        eprintln!("error: the password must have at least {MIN_PASSWORD_CHARS} characters");
        return ExitCode::FAILURE;
    }
    if password.len() > MAX_PASSWORD_BYTES {
        eprintln!("error: the password must be at most {MAX_PASSWORD_BYTES} bytes");
        return ExitCode::FAILURE;
    }
    match hash_password(password) {
        Ok(hash) => {
            println!("{hash}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: cannot hash the password: {err}");
            ExitCode::FAILURE
        }
    }
}
