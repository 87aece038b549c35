//! Where a Model's requests go: the presets' and providers' documented base URLs, and [`resolve`], the
//! effective endpoint of a spec. Pure: no I/O, no Secret read.

use super::{ModelPreset, ModelProvider, ModelSpec};

/// OpenAI's API, whose paths (`/chat/completions`, `/models`) follow it.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's API, whose paths (`/v1/messages`, `/v1/models`) carry the version.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// Google's Gemini API, whose paths (`/v1beta/models/<model>:generateContent`) carry the version.
pub const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The documented OpenAI-compatible base URL of a hosted preset; `None` for the self-hosted ones
/// (`ollama`, `vllm`), whose documented defaults are `localhost` of the machine that runs them
/// (`http://localhost:11434/v1`, `http://localhost:8000/v1`), never where a runner pod is, so a Model
/// names them with `baseURL`.
///
/// The mainland-China endpoints, for the teams the presets are for; other regions are a `baseURL`
/// away. Sources, read 2026-12-05:
/// - `deepseek`: DeepSeek API docs, "Your First API Call" (api-docs.deepseek.com): `base_url`
///   `https://api.deepseek.com` (`/v1` is accepted too and means no model version).
/// - `qwen`: Alibaba Cloud Model Studio, "OpenAI compatibility of DashScope"
///   (help.aliyun.com/zh/model-studio/compatibility-of-openai-with-dashscope):
///   `https://dashscope.aliyuncs.com/compatible-mode/v1` (Beijing; `dashscope-intl.aliyuncs.com` for
///   Singapore).
/// - `zhipu`: Zhipu BigModel open platform (open.bigmodel.cn, "OpenAI API compatibility"):
///   `https://open.bigmodel.cn/api/paas/v4` (`https://api.z.ai/api/paas/v4` outside China).
/// - `moonshot`: Kimi open platform, API overview (platform.kimi.com/docs/api/overview): `base_url`
///   `https://api.moonshot.cn/v1` (`https://api.moonshot.ai/v1` outside China).
/// - `siliconflow`: SiliconFlow docs, quick start (docs.siliconflow.cn/docs/userguide/quickstart):
///   `https://api.siliconflow.cn/v1` (`https://api.siliconflow.com/v1` outside China).
/// - `ollama`: Ollama docs, "OpenAI compatibility" (docs.ollama.com/api/openai-compatibility).
/// - `vllm`: vLLM docs, "OpenAI-Compatible Server" (docs.vllm.ai/en/latest/serving/openai_compatible_server.html).
pub fn preset_base_url(preset: ModelPreset) -> Option<&'static str> {
    match preset {
        ModelPreset::Deepseek => Some("https://api.deepseek.com"),
        ModelPreset::Qwen => Some("https://dashscope.aliyuncs.com/compatible-mode/v1"),
        ModelPreset::Zhipu => Some("https://open.bigmodel.cn/api/paas/v4"),
        ModelPreset::Moonshot => Some("https://api.moonshot.cn/v1"),
        ModelPreset::Siliconflow => Some("https://api.siliconflow.cn/v1"),
        ModelPreset::Ollama | ModelPreset::Vllm => None,
    }
}

/// The Bedrock runtime endpoint of an AWS region (`https://bedrock-runtime.<region>.amazonaws.com`;
/// the `cn-` regions are under `amazonaws.com.cn`).
pub fn bedrock_base_url(region: &str) -> String {
    let domain = if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
    format!("https://bedrock-runtime.{region}.{domain}")
}

/// Where a Model's requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The provider's API.
    pub provider: ModelProvider,
    /// The base URL without a trailing `/`, which the provider's paths are appended to.
    pub base_url: String,
    /// What requests name as the model: the model id, or the deployment for AzureOpenAI.
    pub model: String,
    /// AzureOpenAI's `api-version` query parameter.
    pub api_version: Option<String>,
    /// Bedrock's AWS region, for signing.
    pub region: Option<String>,
}

/// Why a spec has no endpoint. Validation refuses these specs; a caller that skipped it gets this.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// A provider that needs a base URL has none (OpenAICompatible without a hosted preset, AzureOpenAI).
    #[error("spec.baseURL: provider {provider} needs a base URL here")]
    NoBaseUrl {
        /// The provider, as written in manifests.
        provider: &'static str,
    },
    /// AzureOpenAI without `azure`, or Bedrock without `bedrock`.
    #[error("spec.{field}: provider {provider} needs it")]
    Missing {
        /// `azure` or `bedrock`.
        field: &'static str,
        /// The provider, as written in manifests.
        provider: &'static str,
    },
}

/// The effective endpoint of `spec`: `baseURL` when set (a trailing `/` removed); otherwise the
/// preset's URL ([`preset_base_url`]) or the provider's default ([`OPENAI_BASE_URL`],
/// [`ANTHROPIC_BASE_URL`], [`GEMINI_BASE_URL`], [`bedrock_base_url`] of the region). The model named in
/// requests is the Azure deployment for AzureOpenAI, the model id otherwise.
///
/// Errors: [`EndpointError::NoBaseUrl`] for OpenAICompatible without `baseURL` or a hosted preset, and
/// AzureOpenAI without `baseURL`; [`EndpointError::Missing`] for AzureOpenAI without `azure` or Bedrock
/// without `bedrock`.
pub fn resolve(spec: &ModelSpec) -> Result<Endpoint, EndpointError> {
    let provider = spec.provider;
    let no_base_url = || EndpointError::NoBaseUrl { provider: provider.as_str() };
    let missing = |field| EndpointError::Missing { field, provider: provider.as_str() };
    let default = match provider {
        ModelProvider::OpenAI => Some(OPENAI_BASE_URL.to_string()),
        ModelProvider::Anthropic => Some(ANTHROPIC_BASE_URL.to_string()),
        ModelProvider::Gemini => Some(GEMINI_BASE_URL.to_string()),
        ModelProvider::OpenAICompatible => spec.preset.and_then(preset_base_url).map(str::to_string),
        ModelProvider::AzureOpenAI => None,
        ModelProvider::Bedrock => spec.bedrock.as_ref().map(|b| bedrock_base_url(&b.region)),
    };
    let base_url = spec.base_url.as_deref().map(|url| url.trim_end_matches('/').to_string()).or(default);
    let (model, api_version, region) = match provider {
        ModelProvider::AzureOpenAI => {
            let azure = spec.azure.as_ref().ok_or_else(|| missing("azure"))?;
            (azure.deployment.clone(), Some(azure.api_version.clone()), None)
        }
        ModelProvider::Bedrock => {
            let bedrock = spec.bedrock.as_ref().ok_or_else(|| missing("bedrock"))?;
            (spec.model.clone(), None, Some(bedrock.region.clone()))
        }
        _ => (spec.model.clone(), None, None),
    };
    Ok(Endpoint { provider, base_url: base_url.ok_or_else(no_base_url)?, model, api_version, region })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::model::{AzureEndpoint, BedrockEndpoint};

    fn spec(yaml: &str) -> ModelSpec {
        serde_norway::from_str(yaml).expect("a ModelSpec")
    }

    #[test]
    fn the_providers_defaults() {
        for (provider, url) in
            [("OpenAI", OPENAI_BASE_URL), ("Anthropic", ANTHROPIC_BASE_URL), ("Gemini", GEMINI_BASE_URL)]
        {
            let endpoint = resolve(&spec(&format!("provider: {provider}\nmodel: m"))).expect("resolves");
            assert_eq!((endpoint.base_url.as_str(), endpoint.model.as_str()), (url, "m"), "{provider}");
            assert_eq!((endpoint.api_version, endpoint.region), (None, None));
        }
    }

    #[test]
    fn each_hosted_preset_gives_its_documented_url() {
        let cases = [
            ("deepseek", "https://api.deepseek.com"),
            ("qwen", "https://dashscope.aliyuncs.com/compatible-mode/v1"),
            ("zhipu", "https://open.bigmodel.cn/api/paas/v4"),
            ("moonshot", "https://api.moonshot.cn/v1"),
            ("siliconflow", "https://api.siliconflow.cn/v1"),
        ];
        for (preset, url) in cases {
            let endpoint = resolve(&spec(&format!("provider: OpenAICompatible\nmodel: m\npreset: {preset}")));
            assert_eq!(endpoint.expect("resolves").base_url, url, "{preset}");
        }
    }

    #[test]
    fn self_hosted_presets_need_a_base_url() {
        for preset in ["ollama", "vllm"] {
            let bare = spec(&format!("provider: OpenAICompatible\nmodel: m\npreset: {preset}"));
            assert_eq!(resolve(&bare), Err(EndpointError::NoBaseUrl { provider: "OpenAICompatible" }));
            let named = spec(&format!(
                "provider: OpenAICompatible\nmodel: m\npreset: {preset}\nbaseURL: http://llm.models.svc:8000/v1"
            ));
            assert_eq!(resolve(&named).expect("resolves").base_url, "http://llm.models.svc:8000/v1");
        }
        let none = spec("provider: OpenAICompatible\nmodel: m");
        assert_eq!(resolve(&none), Err(EndpointError::NoBaseUrl { provider: "OpenAICompatible" }));
    }

    #[test]
    fn a_base_url_overrides_the_default_without_its_trailing_slash() {
        let qwen_intl = spec(
            "provider: OpenAICompatible\nmodel: qwen-plus\npreset: qwen\nbaseURL: https://dashscope-intl.aliyuncs.com/compatible-mode/v1/",
        );
        assert_eq!(
            resolve(&qwen_intl).expect("resolves").base_url,
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"
        );
        let gateway = spec("provider: Anthropic\nmodel: claude\nbaseURL: https://llm-gateway.example.com/anthropic");
        assert_eq!(resolve(&gateway).expect("resolves").base_url, "https://llm-gateway.example.com/anthropic");
    }

    #[test]
    fn azure_names_the_deployment_and_the_api_version() {
        let mut azure = spec("provider: AzureOpenAI\nmodel: gpt-4o\nbaseURL: https://team-a.openai.azure.com");
        assert_eq!(resolve(&azure), Err(EndpointError::Missing { field: "azure", provider: "AzureOpenAI" }));
        azure.azure = Some(AzureEndpoint { deployment: "chat".into(), api_version: "2024-10-21".into() });
        let endpoint = resolve(&azure).expect("resolves");
        assert_eq!(endpoint.base_url, "https://team-a.openai.azure.com");
        assert_eq!((endpoint.model.as_str(), endpoint.api_version.as_deref()), ("chat", Some("2024-10-21")));
        azure.base_url = None;
        assert_eq!(resolve(&azure), Err(EndpointError::NoBaseUrl { provider: "AzureOpenAI" }));
    }

    #[test]
    fn bedrock_defaults_to_the_regions_runtime_endpoint() {
        let mut bedrock = spec("provider: Bedrock\nmodel: anthropic.claude-3-5-sonnet-20240620-v1:0");
        assert_eq!(resolve(&bedrock), Err(EndpointError::Missing { field: "bedrock", provider: "Bedrock" }));
        bedrock.bedrock = Some(BedrockEndpoint { region: "eu-central-1".into(), access_key_secret_ref: None });
        let endpoint = resolve(&bedrock).expect("resolves");
        assert_eq!(endpoint.base_url, "https://bedrock-runtime.eu-central-1.amazonaws.com");
        assert_eq!(endpoint.region.as_deref(), Some("eu-central-1"));
        assert_eq!(bedrock_base_url("cn-north-1"), "https://bedrock-runtime.cn-north-1.amazonaws.com.cn");
    }
}
