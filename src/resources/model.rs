//! The `Model` custom resource (`models.yuxi.dev/v1alpha1`).
//!
//! A Model is one chat-model endpoint a team may run agents on: a provider (`OpenAI`, `OpenAICompatible`,
//! `AzureOpenAI`, `Anthropic`, `Gemini`, `Bedrock`), the provider's model id, where to reach it, which
//! Secret of the Model's namespace holds its key, and what it can do and costs. It is the resource form
//! of the chart's single base URL and key (issue 34): each team may have its own key and endpoints.
//!
//! Agents name a Model by its name in `context.model` (a run by `spec.model`, a request by
//! `model_spec`): [`resource_name`] tells a Model's name from a `<provider>/<model>` id. The controller
//! probes each Model and writes `Accepted` and `Available` to its status.
//!
//! As for Agents, the single-object rules are carried twice: CEL rules in the CRD, and
//! [`crate::resources::validation::validate_model`] for the webhook and the local mode, each naming the
//! same field. Keys are never part of the object: only references to Secrets.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::AgentShare;
use super::knowledge_base::SecretKeyRef;

mod endpoint;
mod pricing;
pub use endpoint::{
    ANTHROPIC_BASE_URL, Endpoint, EndpointError, GEMINI_BASE_URL, OPENAI_BASE_URL, preset_base_url, resolve,
};
mod rules;
pub mod secrets;
pub use pricing::{PRICE_PATTERN, cost_picos, format_picos, parse_amount_picos, parse_price_micros};
pub use rules::*;

/// The condition type saying the spec is valid and its references resolve.
pub const ACCEPTED: &str = "Accepted";
/// The condition type saying the last probe of the endpoint answered.
pub const AVAILABLE: &str = "Available";

/// The default of `probeIntervalSeconds`, in seconds.
pub const DEFAULT_PROBE_INTERVAL_SECONDS: u32 = 300;
/// The bounds of `probeIntervalSeconds`, in seconds: not more often than every 30 s (a probe costs the
/// provider a request), at least once a day.
pub const PROBE_INTERVAL_SECONDS: std::ops::RangeInclusive<u32> = 30..=86_400;

/// The desired state of a Model.
// Each `printcolumn(...)` repeats the same keys, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "yuxi.dev",
    version = "v1alpha1",
    kind = "Model",
    plural = "models",
    singular = "model",
    shortname = "mdl",
    category = "yuxi",
    namespaced,
    status = "ModelStatus",
    doc = "A chat-model endpoint agents may run on: the provider, the provider's model id, where to reach it, the Secret holding its key, what it can do and what it costs. `metadata.name` is how agents will name it.",
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider", description = "The provider's API"),
    printcolumn(name = "Model", type_ = "string", json_path = ".spec.model", description = "The provider's model id"),
    printcolumn(name = "Available", type_ = "string", json_path = ".status.conditions[?(@.type==\"Available\")].status", description = "Whether the last probe of the endpoint answered"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')")
        .message("a Model's name is how agents name it and must be a DNS-1123 label (at most 63 lowercase letters, digits and '-')")
        .field_path(".metadata.name"),
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.preset) || self.provider == 'OpenAICompatible'")
        .message(PRESET_MESSAGE)
        .field_path(".preset"),
    validation = Rule::new("self.provider != 'OpenAICompatible' || has(self.baseURL) || (has(self.preset) && self.preset in ['deepseek', 'qwen', 'zhipu', 'moonshot', 'siliconflow'])")
        .message(COMPATIBLE_BASE_URL_MESSAGE)
        .field_path(".baseURL"),
    validation = Rule::new("self.provider != 'AzureOpenAI' || has(self.baseURL)")
        .message(AZURE_BASE_URL_MESSAGE)
        .field_path(".baseURL"),
    validation = Rule::new(BASE_URL_RULE)
        .message(BASE_URL_MESSAGE)
        .field_path(".baseURL"),
    validation = Rule::new("(self.provider == 'AzureOpenAI') == has(self.azure)")
        .message(AZURE_MESSAGE)
        .field_path(".azure"),
    validation = Rule::new("(self.provider == 'Bedrock') == has(self.bedrock)")
        .message(BEDROCK_MESSAGE)
        .field_path(".bedrock"),
    validation = Rule::new("self.provider in ['Bedrock', 'OpenAICompatible'] || has(self.apiKeySecretRef)")
        .message(API_KEY_REQUIRED_MESSAGE)
        .field_path(".apiKeySecretRef"),
    validation = Rule::new("self.provider != 'Bedrock' || !has(self.apiKeySecretRef)")
        .message(BEDROCK_API_KEY_MESSAGE)
        .field_path(".apiKeySecretRef"),
    validation = Rule::new("!has(self.callerAudience) || (self.provider == 'OpenAICompatible' && !has(self.apiKeySecretRef))")
        .message(CALLER_AUDIENCE_MESSAGE)
        .field_path(".callerAudience"),
)]
pub struct ModelSpec {
    /// The provider's API: `OpenAI`, `OpenAICompatible` (any Chat Completions endpoint; see `preset`),
    /// `AzureOpenAI`, `Anthropic`, `Gemini` or `Bedrock`.
    pub provider: ModelProvider,

    /// The provider's model id, as its API takes it (`gpt-4o-mini`, `deepseek-chat`,
    /// `claude-sonnet-4-5`, `anthropic.claude-3-5-sonnet-20240620-v1:0`). 1 to 256 printable ASCII
    /// characters without spaces. For AzureOpenAI, the model behind the deployment (for display and
    /// pricing); requests name `azure.deployment`.
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[!-~]+$"))]
    pub model: String,

    /// Human-readable name shown in model pickers. Defaults to `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    pub display_name: Option<String>,

    /// What the model is good for, shown beside it in model pickers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,

    /// A known OpenAI-compatible service (provider `OpenAICompatible` only): `deepseek`, `qwen`
    /// (DashScope), `zhipu` (GLM), `moonshot` (Kimi) and `siliconflow` give the service's base URL, so
    /// `baseURL` may be left out; `ollama` and `vllm` name a self-hosted server, whose `baseURL` is
    /// still needed. A `baseURL` overrides the preset's (another region, a proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<ModelPreset>,

    /// The API's base URL, which request paths are appended to (`https://api.deepseek.com`,
    /// `http://vllm.models.svc:8000/v1`). Required for AzureOpenAI (`https://<resource>.openai.azure.com`)
    /// and for OpenAICompatible without a hosted preset; otherwise it overrides the provider's or
    /// preset's default. `https://`, or `http://` only to loopback or a cluster Service (`*.svc`).
    #[serde(default, rename = "baseURL", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub base_url: Option<String>,

    /// The Azure OpenAI deployment and API version; set exactly when provider is `AzureOpenAI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureEndpoint>,

    /// The AWS region and credentials; set exactly when provider is `Bedrock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bedrock: Option<BedrockEndpoint>,

    /// The key of a Secret in the Model's namespace holding the API key (required for OpenAI,
    /// AzureOpenAI, Anthropic and Gemini; optional for OpenAICompatible; not for Bedrock). The key is
    /// read by the role that calls the model and never written into status, events or logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<SecretKeyRef>,

    /// Call the endpoint as each run's user (an OpenAI-compatible gateway that checks who asks): the
    /// key sent is a token of the run's user for this audience, which the runner asks of the facade
    /// (the user's own OIDC token when it is for the audience, else one exchanged at the issuer, RFC
    /// 8693; the audience must be in the OIDC configuration's `exchangeAudiences`). OpenAICompatible
    /// only, in place of `apiKeySecretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub caller_audience: Option<String>,

    /// More HTTP headers sent with every request (an organisation id, a gateway's routing header), at
    /// most 32, names unique. A header that carries a credential (`Authorization`, `api-key`,
    /// `x-api-key`, `x-goog-api-key`, `Proxy-Authorization`, `Cookie`) must take its value from a Secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub headers: Vec<ModelHeader>,

    /// A key of a ConfigMap in the Model's namespace holding the PEM certificates that verify the
    /// endpoint's TLS certificate, in place of the system's roots (a private CA for an internal gateway).
    /// A ConfigMap, not a Secret, because CA certificates are public, which is where trust-manager and
    /// `kube-root-ca.crt` publish bundles; not inline, so a bundle rotates without editing Models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_ref: Option<ConfigMapKeyRef>,

    /// The request parameters used when an agent's run does not set its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<ModelParameters>,

    /// What the model can do, for model pickers and for agents that need tools or images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<ModelCapabilities>,

    /// What the model costs, for pricing runs by their token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<ModelPricing>,

    /// How often the endpoint is probed (a list-models or one-token call), in seconds: 30 to 86400,
    /// default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 86400))]
    pub probe_interval_seconds: Option<u32>,

    /// Who may use the model and who may manage it (the same scopes and rules as an Agent's `share`).
    /// Omitted: only the owner and administrators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<AgentShare>,

    /// The user id (uid) of the model's owner, who may always manage it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub owner: Option<String>,
}

/// The provider's API a Model speaks.
// The variants are commented with `//`: a documented variant would make the schema a `oneOf`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelProvider {
    // OpenAI's API (`https://api.openai.com/v1`).
    OpenAI,
    // Any OpenAI Chat Completions endpoint: a preset's service, or `baseURL`.
    OpenAICompatible,
    // Azure OpenAI: a resource's deployment and API version.
    AzureOpenAI,
    // Anthropic's Messages API (`https://api.anthropic.com`).
    Anthropic,
    // Google's Gemini API (`https://generativelanguage.googleapis.com`).
    Gemini,
    // Amazon Bedrock's Converse API, signed with AWS credentials.
    Bedrock,
}

impl ModelProvider {
    /// The name as written in manifests (`OpenAICompatible`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAI => "OpenAI",
            Self::OpenAICompatible => "OpenAICompatible",
            Self::AzureOpenAI => "AzureOpenAI",
            Self::Anthropic => "Anthropic",
            Self::Gemini => "Gemini",
            Self::Bedrock => "Bedrock",
        }
    }
}

/// A known OpenAI-compatible service ([`preset_base_url`] gives each one's base URL and its source).
// The variants are commented with `//`: a documented variant would make the schema a `oneOf`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ModelPreset {
    // DeepSeek's API.
    Deepseek,
    // Alibaba Cloud Model Studio (DashScope), compatible mode: the Qwen models.
    Qwen,
    // Zhipu's BigModel platform: the GLM models.
    Zhipu,
    // Moonshot AI: the Kimi models.
    Moonshot,
    // SiliconFlow's hosted open models.
    Siliconflow,
    // A self-hosted Ollama server (`baseURL` required).
    Ollama,
    // A self-hosted vLLM server (`baseURL` required).
    Vllm,
}

impl ModelPreset {
    /// The name as written in manifests (`siliconflow`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deepseek => "deepseek",
            Self::Qwen => "qwen",
            Self::Zhipu => "zhipu",
            Self::Moonshot => "moonshot",
            Self::Siliconflow => "siliconflow",
            Self::Ollama => "ollama",
            Self::Vllm => "vllm",
        }
    }
}

/// An Azure OpenAI deployment.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AzureEndpoint {
    /// The deployment's name, as requests name it (`/openai/deployments/<deployment>/...`).
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub deployment: String,

    /// The `api-version` query parameter, a date with an optional `-preview` (`2024-10-21`).
    #[schemars(length(min = 10, max = 18), regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$"))]
    pub api_version: String,
}

/// An Amazon Bedrock region and the credentials that sign requests to it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BedrockEndpoint {
    /// The AWS region (`us-east-1`, `eu-central-1`, `us-gov-west-1`); the endpoint is
    /// `https://bedrock-runtime.<region>.amazonaws.com` unless `baseURL` says otherwise.
    #[schemars(length(min = 1, max = 32), regex(pattern = r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$"))]
    pub region: String,

    /// A Secret of the Model's namespace holding an access key pair. Omitted: the runner pod's own
    /// AWS identity (web identity: IRSA or EKS Pod Identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_secret_ref: Option<AwsAccessKeyRef>,
}

/// A Secret holding an AWS access key pair (and, for temporary credentials, a session token).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AwsAccessKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// The key holding the access key id. Default `AWS_ACCESS_KEY_ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub access_key_id_key: Option<String>,

    /// The key holding the secret access key. Default `AWS_SECRET_ACCESS_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_access_key_key: Option<String>,

    /// The key holding a session token, for temporary credentials. Omitted: none is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub session_token_key: Option<String>,
}

/// One extra HTTP header: a literal `value`, or a Secret's key (`secretKeyRef`); exactly one of them.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.value) != has(self.secretKeyRef)")
        .message(HEADER_ONE_OF_MESSAGE),
    validation = Rule::new(HEADER_CREDENTIAL_RULE)
        .message(HEADER_CREDENTIAL_MESSAGE)
        .field_path(".value"),
)]
pub struct ModelHeader {
    /// The header's name, an HTTP token (`OpenAI-Organization`, `X-Gateway-Route`).
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"))]
    pub name: String,

    /// The header's value, in plain text: never a credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub value: Option<String>,

    /// A key of a Secret in the Model's namespace whose value is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeyRef>,
}

/// One key of a ConfigMap of the Model's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKeyRef {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key within it.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// Request parameters a run uses unless it sets its own.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelParameters {
    /// Sampling temperature, 0 to 2. Omitted: the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f64>,

    /// The most tokens one answer may have, 1 to 1000000. Omitted: the provider's default (Anthropic
    /// requires one; its client will send 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub max_output_tokens: Option<u32>,

    /// How hard a reasoning model thinks: `Minimal`, `Low`, `Medium` or `High`, mapped onto each
    /// provider's setting. Omitted: the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// How hard a reasoning model thinks.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

/// What a model can do.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelCapabilities {
    /// Whether it calls tools. Omitted: true (agents need tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<bool>,

    /// Whether it reads images. Omitted: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<bool>,

    /// Its context window, in tokens (1 to 100000000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000000))]
    pub context_window: Option<u32>,
}

/// What a model costs, per million tokens, in `currency`.
///
/// Prices are decimal strings with at most 6 digits after the point (`"0.15"`, `"2.5"`, `"0.000125"`),
/// so a price is a whole number of micro-units ([`parse_price_micros`]) and costs are summed in
/// integers: a binary float would turn `0.1` into `0.1000000000000000055…` and lose or invent money over
/// millions of runs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelPricing {
    /// The ISO 4217 code of the prices' currency (`USD`, `CNY`).
    #[schemars(length(min = 3, max = 3), regex(pattern = r"^[A-Z]{3}$"))]
    pub currency: String,

    /// The price of a million input (prompt) tokens not read from the provider's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 13), regex(pattern = r"^(0|[1-9][0-9]{0,5})(\.[0-9]{1,6})?$"))]
    pub input_per_million: Option<String>,

    /// The price of a million output (completion) tokens, reasoning tokens included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 13), regex(pattern = r"^(0|[1-9][0-9]{0,5})(\.[0-9]{1,6})?$"))]
    pub output_per_million: Option<String>,

    /// The price of a million input tokens read from the provider's prompt cache. Omitted: the input
    /// price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 13), regex(pattern = r"^(0|[1-9][0-9]{0,5})(\.[0-9]{1,6})?$"))]
    pub cached_input_per_million: Option<String>,
}

/// The observed state of a Model, written by the prober. It never holds a key: a probe's error is the
/// provider's status and message with any credential the request carried removed.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    /// The `metadata.generation` the status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Accepted` (the spec is valid and its Secrets and ConfigMap exist) and `Available` (the last
    /// probe answered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// When the endpoint was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,

    /// How long the last probe took to answer, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_latency_milliseconds: Option<i64>,

    /// Why the last probe failed (the HTTP status and the provider's message), or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub last_probe_error: Option<String>,
}

/// The Model resource a model id names: an id without `/` is the `metadata.name` of a Model in the
/// run's namespace; `<provider>/<model>` (`openai/gpt-4o-mini`, `scripted/echo`) names none.
pub fn resource_name(id: &str) -> Option<&str> {
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The model a run runs on: the run's own (`AgentRun.spec.model`, a request's `model_spec`), else its
/// Agent's `context.model`, else the installation's default; empty strings count as unset.
pub fn effective<'a>(run: Option<&'a str>, agent: Option<&'a str>, default: Option<&'a str>) -> Option<&'a str> {
    [run, agent, default].into_iter().flatten().find(|m| !m.is_empty())
}

impl ModelSpec {
    /// `probeIntervalSeconds`, or its default (300), in seconds.
    pub fn probe_interval_seconds(&self) -> u32 {
        self.probe_interval_seconds.unwrap_or(DEFAULT_PROBE_INTERVAL_SECONDS)
    }
}
