//! The texts of a Model's CEL rules and their messages, which
//! [`crate::resources::validation::validate_model`] gives too, so the API server, the webhook and the local
//! mode word a refusal alike.

/// The rule a `baseURL` follows, as a regular expression both CEL (RE2) and the `regex` crate read alike:
/// `https://` to any host, or `http://` only to loopback (`localhost`, `127.0.0.1`, `[::1]`: the local
/// mode) or a cluster Service (`<name>.<namespace>.svc`, optionally `.cluster.local`), with an optional
/// port and path and no user info, query or fragment. A key sent over plain HTTP to the internet is a
/// key given away; inside the cluster the traffic stays on the cluster network, where self-hosted vLLM
/// and Ollama usually listen without TLS.
pub const BASE_URL_PATTERN: &str = r"^(https://([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])|http://(localhost|127\.0\.0\.1|\[::1\]|([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+svc(\.cluster\.local)?))(:[0-9]{1,5})?(/[-A-Za-z0-9._~!$&'()*+,;=:@%/]*)?$";

/// The CEL rule of `baseURL`: [`BASE_URL_PATTERN`] as a raw CEL string.
pub(crate) const BASE_URL_RULE: &str = r#"!has(self.baseURL) || self.baseURL.matches(r"^(https://([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])|http://(localhost|127\.0\.0\.1|\[::1\]|([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+svc(\.cluster\.local)?))(:[0-9]{1,5})?(/[-A-Za-z0-9._~!$&'()*+,;=:@%/]*)?$")"#;

/// The message of the `baseURL` rule.
pub const BASE_URL_MESSAGE: &str = "must be an https:// URL, or http:// to localhost, 127.0.0.1, [::1] or a cluster Service (<name>.<namespace>.svc), without user info, query or fragment";

/// The message of the rule on `preset`: only for OpenAICompatible.
pub const PRESET_MESSAGE: &str = "a preset is only for provider OpenAICompatible";
/// The message of the rule on `baseURL`: OpenAICompatible needs one, or a hosted preset.
pub const COMPATIBLE_BASE_URL_MESSAGE: &str = "provider OpenAICompatible needs baseURL, or a preset of a hosted service (deepseek, qwen, zhipu, moonshot, siliconflow); ollama and vllm run where you deploy them";
/// The message of the rule on `baseURL`: AzureOpenAI needs one.
pub const AZURE_BASE_URL_MESSAGE: &str =
    "provider AzureOpenAI needs baseURL, the resource's endpoint (https://<resource>.openai.azure.com)";
/// The message of the rule on `azure`: set exactly for AzureOpenAI.
pub const AZURE_MESSAGE: &str = "azure (deployment and apiVersion) is set exactly when provider is AzureOpenAI";
/// The message of the rule on `bedrock`: set exactly for Bedrock.
pub const BEDROCK_MESSAGE: &str = "bedrock (region) is set exactly when provider is Bedrock";
/// The message of the rule on `apiKeySecretRef`: required for the providers whose APIs always need a key.
pub const API_KEY_REQUIRED_MESSAGE: &str = "providers OpenAI, AzureOpenAI, Anthropic and Gemini need apiKeySecretRef";
/// The message of the rule on `apiKeySecretRef`: not for Bedrock.
pub const BEDROCK_API_KEY_MESSAGE: &str = "provider Bedrock signs requests with AWS credentials (bedrock.accessKeySecretRef, or the pod's web identity), not an API key";
/// The message of the rule on `callerAudience`: an OpenAI-compatible endpoint, without an API key.
pub const CALLER_AUDIENCE_MESSAGE: &str = "callerAudience (each run's user's own token as the key) is for provider OpenAICompatible, in place of apiKeySecretRef";
/// The message of the rule on a header: exactly one of `value` and `secretKeyRef`.
pub const HEADER_ONE_OF_MESSAGE: &str = "set exactly one of value and secretKeyRef";
/// The message of the rule on a header's `value`: never a credential.
pub const HEADER_CREDENTIAL_MESSAGE: &str =
    "a header that carries a credential takes its value from a Secret (secretKeyRef), never a literal value";

/// Header names that carry credentials (compared in lowercase): their value must come from a Secret.
pub const CREDENTIAL_HEADERS: [&str; 6] =
    ["authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key", "cookie"];

/// The CEL rule on a header's `value`: a credential header ([`CREDENTIAL_HEADERS`]) takes no literal.
pub const HEADER_CREDENTIAL_RULE: &str = "!has(self.value) || !(self.name.lowerAscii() in ['authorization', 'proxy-authorization', 'api-key', 'x-api-key', 'x-goog-api-key', 'cookie'])";
