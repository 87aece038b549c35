//! Where a run sits in a caller's trace: the W3C Trace Context `traceparent` a run is started under
//! (<https://www.w3.org/TR/trace-context/#traceparent-header>), carried from the facade's request to the
//! run's record, its AgentRun (the annotation [`TRACEPARENT_ANNOTATION`]) and its runner, and from a
//! parent run's tool call to the children it starts, so that a whole run tree is one trace.
//!
//! Pure: only the header's form is checked here; making and exporting spans is the roles' part.

/// The AgentRun annotation holding the `traceparent` its run's span is a child of.
pub const TRACEPARENT_ANNOTATION: &str = "yuxi.dev/traceparent";

/// The longest `tracestate` kept, in bytes (the specification's limit is 512).
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// A parsed `traceparent`: version `00`, a 16-byte trace id and an 8-byte parent span id, neither all
/// zeros, and the trace flags (bit 0: sampled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace id.
    pub trace_id: [u8; 16],
    /// The parent span's id.
    pub parent_id: [u8; 8],
    /// The trace flags.
    pub flags: u8,
}

impl TraceParent {
    /// Reads a `traceparent` header value (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase hex). A later
    /// version is read by its first four fields, as the specification asks; anything else is `None`
    /// (and a run then starts a trace of its own).
    pub fn parse(text: &str) -> Option<TraceParent> {
        let text = text.trim();
        let mut parts = text.split('-');
        let version = parts.next()?;
        let (trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version == "ff" || !is_lower_hex(version) {
            return None;
        }
        if version == "00" && (parts.next().is_some() || text.len() != 55) {
            return None;
        }
        let trace_id: [u8; 16] = hex(trace)?.try_into().ok()?;
        let parent_id: [u8; 8] = hex(parent)?.try_into().ok()?;
        let flags = *hex(flags)?.first()?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(TraceParent { trace_id, parent_id, flags })
    }

    /// Whether the caller sampled the trace (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id as 32 lowercase hex digits.
    pub fn trace_id_hex(&self) -> String {
        to_hex(&self.trace_id)
    }
}

impl std::fmt::Display for TraceParent {
    /// The header value, version `00`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "00-{}-{}-{:02x}", to_hex(&self.trace_id), to_hex(&self.parent_id), self.flags)
    }
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !is_lower_hex(text) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An MCP tool call with `traceparent` (when given) in its `_meta` (MCP's SEP-414), so that the
/// server's spans join the caller's trace.
pub fn with_traceparent(
    mut request: rmcp::model::CallToolRequestParams,
    traceparent: Option<String>,
) -> rmcp::model::CallToolRequestParams {
    if let Some(traceparent) = traceparent {
        request.meta.get_or_insert_with(rmcp::model::RequestMetaObject::new).set_traceparent(traceparent);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_as_the_specification_writes_it() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(text).expect("the specification's example");
        assert_eq!(parsed.to_string(), text);
        assert!(parsed.sampled());
        assert_eq!(parsed.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        // A later version is read by its first four fields.
        assert!(TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra").is_some());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }
}
