//! The built-in tools every runner offers (the deepagents names Yuxi uses), named once here so the
//! runner that grants them and the facade that lists them (`GET /api/system/tools`) agree.

/// The built-in tool names.
pub mod names {
    /// List a directory.
    pub const LS: &str = "ls";
    /// Read a file, with line numbers.
    pub const READ_FILE: &str = "read_file";
    /// Create or overwrite a file.
    pub const WRITE_FILE: &str = "write_file";
    /// Replace text in a file.
    pub const EDIT_FILE: &str = "edit_file";
    /// Find files by glob pattern.
    pub const GLOB: &str = "glob";
    /// Search file contents by regular expression.
    pub const GREP: &str = "grep";
    /// Run a shell command in the sandbox.
    pub const EXECUTE: &str = "execute";
    /// Every built-in tool.
    pub const BUILTIN: [&str; 7] = [LS, READ_FILE, WRITE_FILE, EDIT_FILE, GLOB, GREP, EXECUTE];
    /// The tools a subagent in `Default` approval mode does not get (Yuxi: write, edit and execute).
    pub const NEED_APPROVAL: [&str; 3] = [WRITE_FILE, EDIT_FILE, EXECUTE];
}

/// One built-in tool as a catalogue shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinTool {
    /// Its name, as `context.tools` lists it.
    pub name: &'static str,
    /// What it does, in a sentence.
    pub description: &'static str,
    /// Whether a subagent in `Default` approval mode goes without it ([`names::NEED_APPROVAL`]).
    pub needs_approval: bool,
}

/// Every built-in tool, in [`names::BUILTIN`] order.
pub fn builtin_tools() -> Vec<BuiltinTool> {
    names::BUILTIN
        .iter()
        .map(|&name| BuiltinTool {
            name,
            description: match name {
                names::LS => "Lists a directory of the run's folders.",
                names::READ_FILE => "Reads a file, with line numbers.",
                names::WRITE_FILE => "Creates or overwrites a file.",
                names::EDIT_FILE => "Replaces text in a file.",
                names::GLOB => "Finds files by a glob pattern.",
                names::GREP => "Searches file contents by a regular expression.",
                _ => "Runs a shell command in the run's sandbox.",
            },
            needs_approval: names::NEED_APPROVAL.contains(&name),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_tool_is_described_once() {
        let tools = builtin_tools();
        assert_eq!(tools.iter().map(|t| t.name).collect::<Vec<_>>(), names::BUILTIN);
        let described: std::collections::HashSet<_> = tools.iter().map(|t| t.description).collect();
        assert_eq!(described.len(), tools.len(), "each tool has its own description");
        assert_eq!(tools.iter().filter(|t| t.needs_approval).count(), names::NEED_APPROVAL.len());
    }
}
