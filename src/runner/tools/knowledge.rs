//! `knowledge_search`: an agent whose knowledge bases resolve to some (its `context.knowledges`, or
//! every knowledge base its user may read) searches them through the facade. At start the runner asks
//! the facade which ones the run may search (`GET /api/tools/knowledge_bases`); when there are some,
//! their list goes into the system prompt and the tool is offered. Each call goes to
//! `POST /api/tools/knowledge_search` with the run's own credentials, so the facade, not the model,
//! decides what may be searched. The answer (passages with knowledge base, document, location and
//! score, and the knowledge bases that could not answer) is the tool's JSON result.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use super::subagents::{Facade, MountError};
use super::{Tool, ToolError, ToolSpec};

/// The tool's name.
pub const KNOWLEDGE_SEARCH: &str = "knowledge_search";

/// The `knowledge_search` tool and the prompt section for `agent`, or `None` when it has no knowledge
/// base to search.
///
/// Errors: as [`Facade::mount`]; a facade without knowledge bases (503) is `None`, not an error, so an
/// installation without them runs its agents unchanged.
pub async fn mount(facade: &Arc<Facade>, agent: &str) -> Result<Option<(Arc<dyn Tool>, String)>, MountError> {
    let body = match facade.get("/knowledge_bases", agent).await {
        Err(MountError::Refused { status, .. }) if status == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
            return Ok(None);
        }
        other => other?,
    };
    let (Some(prompt), Some(tool)) = (body["prompt"].as_str(), body.get("tool").filter(|t| t.is_object())) else {
        return Ok(None);
    };
    let spec = ToolSpec {
        name: KNOWLEDGE_SEARCH.to_string(),
        description: tool["description"].as_str().unwrap_or_default().to_string(),
        parameters: tool["parameters"].clone(),
    };
    Ok(Some((Arc::new(KnowledgeSearch { spec, facade: facade.clone(), agent: agent.to_string() }), prompt.to_string())))
}

struct KnowledgeSearch {
    spec: ToolSpec,
    facade: Arc<Facade>,
    agent: String,
}

impl Tool for KnowledgeSearch {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call(&self, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        async move {
            let Value::Object(mut body) = arguments else {
                return Err(ToolError::new("the arguments must be a JSON object"));
            };
            // The run's agent is its own: the model cannot name another.
            if body.remove("agent").is_some() {
                return Err(ToolError::new("argument agent is not accepted: the run's agent is its own"));
            }
            body.remove("parent");
            body.insert("agent".into(), Value::String(self.agent.clone()));
            let answer = self.facade.post(KNOWLEDGE_SEARCH, &Value::Object(body), None).await?;
            Ok(answer.to_string())
        }
        .boxed()
    }
}
