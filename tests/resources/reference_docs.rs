//! The reference pages say everything there is: every flag of every subcommand (as `--help` lists it)
//! is in `docs/reference/cli.md` under its subcommand's heading, and every route of the OpenAPI document
//! is in `docs/reference/facade-api.md`.

use std::process::Command;

use crate::support::repository::root;

/// `yuxi-operator <args> --help`, as text.
fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_yuxi-operator")).args(args).arg("--help").output().expect("runs");
    assert!(output.status.success(), "{args:?} --help");
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The lines of `text` after the line `heading` up to the next blank-line-free section heading.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| l.trim_end() != heading)
        .skip(1)
        .take_while(|l| !l.ends_with(':') || l.starts_with(' '))
        .collect()
}

/// The subcommands `--help` lists (hidden ones are not listed), without `help`.
fn subcommands() -> Vec<String> {
    section(&help(&[]), "Commands:")
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags a subcommand's `--help` lists, `--help` and `--version` aside.
fn flags(subcommand: &str) -> Vec<String> {
    section(&help(&[subcommand]), "Options:")
        .iter()
        .filter(|l| l.trim_start().starts_with('-'))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
        .map(|w| w.trim_end_matches(',').split(['=', '<']).next().unwrap_or(w).to_string())
        .filter(|f| f != "--help" && f != "--version")
        .collect()
}

#[test]
fn every_flag_of_every_subcommand_is_in_the_cli_reference() {
    let reference = std::fs::read_to_string(root().join("docs/reference/cli.md")).expect("cli.md");
    let subcommands = subcommands();
    assert!(subcommands.len() >= 10, "{subcommands:?}");
    let mut missing = Vec::new();
    for subcommand in subcommands {
        let heading = format!("## {subcommand}");
        let Some(start) = reference.find(&format!("\n{heading}\n")) else {
            missing.push(format!("{heading}: no section"));
            continue;
        };
        let body = &reference[start + heading.len() + 2..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        for flag in flags(&subcommand) {
            if !body.contains(&format!("`{flag}")) {
                missing.push(format!("{heading}: {flag}"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/reference/cli.md does not describe:\n{}", missing.join("\n"));
}

#[test]
fn every_route_of_the_openapi_document_is_in_the_facade_reference() {
    let reference = std::fs::read_to_string(root().join("docs/reference/facade-api.md")).expect("facade-api.md");
    let (_, document) = yuxi_operator::facade::api();
    let document = serde_json::to_value(&document).expect("JSON");
    let mut missing = Vec::new();
    let mut routes = 0;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            routes += 1;
            let route = format!("`{} {path}", method.to_uppercase());
            if !reference.contains(&route) {
                missing.push(route);
            }
        }
    }
    assert!(routes >= 40, "{routes} routes");
    assert!(missing.is_empty(), "docs/reference/facade-api.md does not describe:\n{}", missing.join("\n"));
}
