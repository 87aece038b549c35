//! A `Model` resource as the roles call it: the resolved endpoint with its credentials, extra headers,
//! CA bundle and default parameters. Built by the role that may read the Model's Secrets (the runner
//! container of the run's pod, from its environment; the local mode, from its manifests and keys) and
//! never written anywhere: its `Debug` shows no credential.

use crate::resources::ModelSpec;
use crate::resources::model::secrets::{Purpose, Reference, Source, references};
use crate::resources::model::{Endpoint, EndpointError, ModelParameters, ModelPricing, ModelProvider, resolve};

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
    /// The audience of the run's user's token that is the key (`spec.callerAudience`): the caller puts
    /// that token into [`Connection::credentials`] before calling.
    pub caller_audience: Option<String>,
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

/// Why a Model cannot be called from here. Never carries a referenced value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The spec has no endpoint (a spec validation would refuse).
    #[error("model {name:?}: {source}")]
    Endpoint {
        /// The Model's name.
        name: String,
        /// Why.
        source: EndpointError,
    },
    /// A referenced Secret or ConfigMap key has no value here.
    #[error(transparent)]
    Missing(Box<MissingValue>),
}

/// A referenced Secret or ConfigMap key with no value where the Model is connected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("model {name:?}: {field} names {kind} {object:?} key {key:?}, which is not there{hint}")]
pub struct MissingValue {
    /// The Model's name.
    pub name: String,
    /// The field naming it.
    pub field: String,
    /// `Secret` or `ConfigMap`.
    pub kind: &'static str,
    /// The object's name.
    pub object: String,
    /// The key.
    pub key: String,
    /// Where the value is looked for in this mode, after `: `; or empty.
    pub hint: String,
}

impl Connection {
    /// The connection of the Model `name` with `spec`, each referenced value read with `lookup`
    /// (the runner container's variables in a pod; the local mode's secrets), whose `hint` says where a
    /// missing value is looked for.
    ///
    /// Errors: [`ConnectionError::Endpoint`] for a spec without an endpoint, [`ConnectionError::Missing`]
    /// for a required value `lookup` does not have, naming the field, the object and the key.
    pub fn from_spec(
        name: &str,
        spec: &ModelSpec,
        lookup: impl Fn(&Reference) -> Option<String>,
        hint: impl Fn(&Reference) -> String,
    ) -> Result<Connection, ConnectionError> {
        let endpoint = resolve(spec).map_err(|source| ConnectionError::Endpoint { name: name.to_string(), source })?;
        let mut values = std::collections::HashMap::new();
        for reference in references(spec) {
            // A value written with `--from-file` often ends in a line break no header or key may carry.
            match lookup(&reference).map(|v| v.trim_end_matches(['\r', '\n']).to_string()) {
                Some(value) => {
                    values.insert(reference.purpose, value);
                }
                None if reference.optional => {}
                None => {
                    return Err(ConnectionError::Missing(Box::new(MissingValue {
                        name: name.to_string(),
                        field: reference.field.clone(),
                        kind: match reference.source {
                            Source::Secret => "Secret",
                            Source::ConfigMap => "ConfigMap",
                        },
                        object: reference.name.clone(),
                        key: reference.key.clone(),
                        hint: hint(&reference),
                    })));
                }
            }
        }
        let credentials = if spec.provider == ModelProvider::Bedrock {
            match (values.remove(&Purpose::AwsAccessKeyId), values.remove(&Purpose::AwsSecretAccessKey)) {
                (Some(access_key_id), Some(secret_access_key)) => Credentials::Aws {
                    access_key_id,
                    secret_access_key,
                    session_token: values.remove(&Purpose::AwsSessionToken),
                },
                _ => Credentials::AwsFromEnvironment,
            }
        } else {
            values.remove(&Purpose::ApiKey).map_or(Credentials::None, Credentials::ApiKey)
        };
        let headers = spec
            .headers
            .iter()
            .enumerate()
            .filter_map(|(index, header)| {
                let value = header.value.clone().or_else(|| values.get(&Purpose::Header(index)).cloned())?;
                Some((header.name.clone(), value))
            })
            .collect();
        Ok(Connection {
            name: name.to_string(),
            endpoint,
            credentials,
            headers,
            caller_audience: spec.caller_audience.clone(),
            ca_bundle: values.remove(&Purpose::CaBundle),
            parameters: spec.parameters.clone().unwrap_or_default(),
            pricing: spec.pricing.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::model::ModelProvider;

    #[test]
    fn debug_shows_no_credential_and_no_header_value() {
        let connection = Connection {
            caller_audience: None,
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

    fn spec(yaml: &str) -> ModelSpec {
        serde_norway::from_str(yaml).expect("a spec")
    }

    #[test]
    fn a_spec_is_connected_with_the_values_its_references_name() {
        let spec = spec(
            "provider: OpenAICompatible\npreset: deepseek\nmodel: deepseek-chat\napiKeySecretRef: {name: keys, key: deepseek}\nheaders:\n- {name: X-Team, value: a}\n- name: X-Route\n  secretKeyRef: {name: gw, key: route}",
        );
        let lookup = |r: &Reference| Some(format!("{}/{}", r.name, r.key));
        let connection = Connection::from_spec("ds", &spec, lookup, |_| String::new()).expect("connects");
        assert!(matches!(&connection.credentials, Credentials::ApiKey(k) if k == "keys/deepseek"));
        assert_eq!(
            connection.headers,
            [("X-Team".to_string(), "a".to_string()), ("X-Route".to_string(), "gw/route".to_string())]
        );
        assert_eq!(connection.endpoint.base_url, "https://api.deepseek.com");
    }

    #[test]
    fn a_missing_value_names_its_field_object_and_key_but_no_value() {
        let spec = spec("provider: Anthropic\nmodel: claude\napiKeySecretRef: {name: team-a-keys, key: anthropic}");
        let err = Connection::from_spec("claude", &spec, |_| None, |_| ": set it".into()).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "model \"claude\": spec.apiKeySecretRef names Secret \"team-a-keys\" key \"anthropic\", which is not there: set it"
        );
    }

    #[test]
    fn bedrock_without_a_key_pair_uses_the_pods_identity() {
        let spec = spec("provider: Bedrock\nmodel: m\nbedrock: {region: us-east-1}");
        let connection = Connection::from_spec("b", &spec, |_| None, |_| String::new()).expect("connects");
        assert!(matches!(connection.credentials, Credentials::AwsFromEnvironment));
        assert_eq!(connection.endpoint.region.as_deref(), Some("us-east-1"));
    }
}
