//! A `Model` resource as the runner calls it: the resolved endpoint with its credentials, extra headers,
//! CA bundle and default parameters. Built by the role that may read the Model's Secrets (the runner
//! container of the run's pod, from its environment; the local mode, from its manifests and keys) and
//! never written anywhere: its `Debug` shows no credential.

use crate::resources::model::{Endpoint, ModelParameters, ModelPricing};

/// How requests to a Model are authenticated.
#[derive(Clone, Default)]
pub enum Credentials {
    /// No credential (a self-hosted OpenAI-compatible server without a key).
    #[default]
    None,
    /// The provider's API key: `Authorization: Bearer` for OpenAI and OpenAI-compatible servers,
    /// `api-key` for Azure OpenAI, `x-api-key` for Anthropic, `x-goog-api-key` for Gemini.
    ApiKey(String),
    /// An AWS access key pair (Bedrock), with a session token for temporary credentials.
    Aws {
        /// The access key id.
        access_key_id: String,
        /// The secret access key.
        secret_access_key: String,
        /// The session token of temporary credentials.
        session_token: Option<String>,
    },
    /// The pod's own AWS identity (Bedrock): web identity from `AWS_ROLE_ARN` and
    /// `AWS_WEB_IDENTITY_TOKEN_FILE`, exchanged with STS when a call needs it.
    AwsFromEnvironment,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "None",
            Self::ApiKey(_) => "ApiKey(<redacted>)",
            Self::Aws { .. } => "Aws(<redacted>)",
            Self::AwsFromEnvironment => "AwsFromEnvironment",
        })
    }
}

/// Everything needed to call one Model.
#[derive(Clone)]
pub struct Connection {
    /// The Model's name (`metadata.name`), for messages and metrics.
    pub name: String,
    /// Where requests go ([`crate::resources::model::resolve`] of the spec).
    pub endpoint: Endpoint,
    /// How requests are authenticated.
    pub credentials: Credentials,
    /// Extra headers sent with every request, Secret values already read, in the spec's order.
    pub headers: Vec<(String, String)>,
    /// PEM certificates that verify the endpoint in place of the system's roots.
    pub ca_bundle: Option<String>,
    /// Request parameters used when the run sets none.
    pub parameters: ModelParameters,
    /// What the model costs; `None` when the Model states no price.
    pub pricing: Option<ModelPricing>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("credentials", &self.credentials)
            .field("headers", &header_names)
            .field("ca_bundle", &self.ca_bundle.as_ref().map(|_| "<pem>"))
            .field("parameters", &self.parameters)
            .field("pricing", &self.pricing)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::model::ModelProvider;

    #[test]
    fn debug_shows_no_credential_and_no_header_value() {
        let connection = Connection {
            name: "team-a".into(),
            endpoint: Endpoint {
                provider: ModelProvider::OpenAI,
                base_url: "https://api.openai.com/v1".into(),
                model: "gpt-4o-mini".into(),
                api_version: None,
                region: None,
            },
            credentials: Credentials::ApiKey("sk-secret-key".into()),
            headers: vec![("X-Gateway-Token".into(), "gateway-secret".into())],
            ca_bundle: None,
            parameters: ModelParameters::default(),
            pricing: None,
        };
        let shown = format!("{connection:?}");
        assert!(!shown.contains("sk-secret-key") && !shown.contains("gateway-secret"), "{shown}");
        assert!(shown.contains("X-Gateway-Token") && shown.contains("ApiKey(<redacted>)"), "{shown}");
    }
}
