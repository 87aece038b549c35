//! The YAML writer of the Kubernetes objects this system prints (`yuxi-operator sandbox-pod`): a small
//! emitter for JSON values that quotes every string a YAML 1.1 or 1.2 reader could take for anything but
//! that string. serde_norway follows YAML 1.2 only, and writes `on` or `yes` plain, which `kubectl` and
//! most tools (YAML 1.1 readers) read as booleans. Pure: text in memory, no I/O.

use serde_json::{Map, Value};

/// Words that YAML 1.1 or 1.2 reads as booleans or null, compared without case.
const RESERVED: [&str; 9] = ["y", "yes", "n", "no", "true", "false", "on", "off", "null"];

/// `objects` as one YAML stream: each a [`document`], separated by `---` lines; empty for no objects.
///
/// The YAML reads the same to YAML 1.2 readers and to the YAML 1.1 ones `kubectl` and most tools use: a
/// string that either could take for something else (`on`, `no`, `y`, `1:20`, `0x1f`, `~`, a leading
/// space) is double-quoted, multi-line strings are literal blocks.
pub fn objects_to_yaml(objects: &[Value]) -> String {
    objects.iter().map(document).collect::<Vec<_>>().join("---\n")
}

/// `value` as one YAML document (without a `---` line), ending in a line break.
pub fn document(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0),
        scalar => {
            out.push_str(&scalar_text(scalar, 2));
            out.push('\n');
        }
    }
    out
}

fn mapping(out: &mut String, map: &Map<String, Value>, indent: usize, first_inline: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !first_inline {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&if is_plain(key) { key.clone() } else { quoted(key) });
        out.push(':');
        child(out, value, indent, false);
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push('-');
        child(out, item, indent, true);
    }
}

/// A value after `key:` or `-`, whose line is indented by `indent`.
fn child(out: &mut String, value: &Value, indent: usize, in_sequence: bool) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            if in_sequence {
                out.push(' ');
                mapping(out, map, indent + 2, true);
            } else {
                out.push('\n');
                mapping(out, map, indent + 2, false);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            sequence(out, items, if in_sequence { indent + 2 } else { indent });
        }
        scalar => {
            out.push(' ');
            out.push_str(&scalar_text(scalar, indent + 2));
            out.push('\n');
        }
    }
}

fn scalar_text(value: &Value, indent: usize) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if is_plain(s) => s.clone(),
        Value::String(s) if is_literal(s) => literal(s, indent),
        Value::String(s) => quoted(s),
        Value::Object(_) => "{}".to_string(),
        Value::Array(_) => "[]".to_string(),
    }
}

/// Whether `s` reads as itself unquoted: it starts with a letter or `/`, holds only letters, digits,
/// spaces and `. _ / - : @ + ,`, is no reserved word, and has no `: `, ` #`, or space at its end.
pub fn is_plain(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || " ._/-:@+,".contains(c))
        && !RESERVED.iter().any(|word| s.eq_ignore_ascii_case(word))
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with([' ', ':'])
}

/// Whether `s` can be a literal block: several lines of printable text, not starting with a space or
/// a blank line (which would need an indentation indicator).
fn is_literal(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\n'])
        && s.chars().all(|c| c == '\n' || c == '\t' || !(c.is_control() || is_unusual(c)))
}

/// Characters some readers refuse unescaped.
fn is_unusual(c: char) -> bool {
    matches!(c, '\u{feff}' | '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}')
}

/// A literal block (`|`, `|-` or `|+` by its trailing line breaks), its lines indented by `indent`.
fn literal(s: &str, indent: usize) -> String {
    let (body, chomping) = match s.strip_suffix('\n') {
        Some(body) if body.ends_with('\n') => (body, "+"),
        Some(body) => (body, ""),
        None => (s, "-"),
    };
    let mut out = format!("|{chomping}");
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            out.push_str(&" ".repeat(indent));
            out.push_str(line);
        }
    }
    out
}

/// `s` double-quoted, with every control or unusual character escaped.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_unusual(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
