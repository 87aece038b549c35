//! Each rule of a Model both ways: specs it admits, and a table of specs each rejected for one field.

use serde_json::Value;

use super::*;
use crate::resources::crd;
use crate::resources::model::BASE_URL_RULE;

fn model(spec: &str) -> Model {
    let spec = spec.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n");
    let yaml = format!("apiVersion: yuxi.dev/v1alpha1\nkind: Model\nmetadata:\n  name: m\nspec:\n{spec}\n");
    serde_norway::from_str(&yaml).unwrap_or_else(|e| panic!("a Model: {e}\n{yaml}"))
}

const KEY: &str = "apiKeySecretRef: {name: keys, key: openai}";

#[test]
fn valid_models_are_admitted() {
    let specs = [
        format!("provider: OpenAI\nmodel: gpt-4o-mini\n{KEY}"),
        "provider: OpenAICompatible\nmodel: deepseek-chat\npreset: deepseek\napiKeySecretRef: {name: keys, key: deepseek}".into(),
        "provider: OpenAICompatible\nmodel: qwen-plus\npreset: qwen\nbaseURL: https://dashscope-intl.aliyuncs.com/compatible-mode/v1".into(),
        "provider: OpenAICompatible\nmodel: qwen3:8b\npreset: ollama\nbaseURL: http://ollama.models.svc:11434/v1".into(),
        "provider: OpenAICompatible\nmodel: Qwen/Qwen3-8B\npreset: vllm\nbaseURL: http://vllm.models.svc.cluster.local:8000/v1".into(),
        "provider: OpenAICompatible\nmodel: local\nbaseURL: http://127.0.0.1:8080/v1".into(),
        format!(
            "provider: AzureOpenAI\nmodel: gpt-4o\nbaseURL: https://team-a.openai.azure.com\nazure: {{deployment: chat, apiVersion: 2024-10-21}}\n{KEY}"
        ),
        "provider: Bedrock\nmodel: anthropic.claude-3-5-sonnet-20240620-v1:0\nbedrock: {region: us-east-1}".into(),
        "provider: Bedrock\nmodel: amazon.nova-pro-v1:0\nbedrock:\n  region: us-gov-west-1\n  accessKeySecretRef: {name: aws, sessionTokenKey: token}".into(),
        format!(
            "provider: Anthropic\nmodel: claude-sonnet-4-5\n{KEY}\nheaders:\n- {{name: anthropic-beta, value: prompt-caching-2024-07-31}}\n- {{name: Authorization, secretKeyRef: {{name: gw, key: token}}}}"
        ),
        format!(
            "provider: Gemini\nmodel: gemini-2.5-flash\n{KEY}\ncaBundleRef: {{name: corp-ca, key: ca.crt}}\nparameters: {{temperature: 0.2, maxOutputTokens: 8192, reasoningEffort: Low}}\ncapabilities: {{toolCalls: true, images: true, contextWindow: 1048576}}\npricing: {{currency: USD, inputPerMillion: '0.3', outputPerMillion: '2.5', cachedInputPerMillion: '0.075'}}\nprobeIntervalSeconds: 600\nshare: {{readScope: {{accessLevel: Global}}}}"
        ),
    ];
    for spec in specs {
        let report = validate_model(&model(&spec));
        assert!(report.is_ok(), "{spec}\n{:?}", report.errors);
    }
}

#[test]
fn each_rule_names_its_field() {
    let azure = "azure: {deployment: chat, apiVersion: 2024-10-21}";
    let cases: Vec<(String, &str)> = vec![
        (format!("provider: OpenAI\nmodel: gpt-4o\npreset: deepseek\n{KEY}"), "spec.preset"),
        (format!("provider: Anthropic\nmodel: claude\npreset: qwen\n{KEY}"), "spec.preset"),
        ("provider: OpenAICompatible\nmodel: m".into(), "spec.baseURL"),
        ("provider: OpenAICompatible\nmodel: m\npreset: vllm".into(), "spec.baseURL"),
        (format!("provider: AzureOpenAI\nmodel: gpt-4o\n{azure}\n{KEY}"), "spec.baseURL"),
        ("provider: OpenAICompatible\nmodel: m\nbaseURL: http://api.example.com/v1".into(), "spec.baseURL"),
        ("provider: OpenAICompatible\nmodel: m\nbaseURL: ftp://example.com".into(), "spec.baseURL"),
        ("provider: OpenAICompatible\nmodel: m\nbaseURL: https://user:pw@example.com".into(), "spec.baseURL"),
        ("provider: OpenAICompatible\nmodel: m\nbaseURL: https://example.com/v1?key=x".into(), "spec.baseURL"),
        ("provider: OpenAICompatible\nmodel: m\nbaseURL: http://vllm.svc.evil.com/v1".into(), "spec.baseURL"),
        (format!("provider: OpenAICompatible\nmodel: m\nbaseURL: https://{}.com", "a".repeat(2040)), "spec.baseURL"),
        (format!("provider: AzureOpenAI\nmodel: gpt-4o\nbaseURL: https://a.openai.azure.com\n{KEY}"), "spec.azure"),
        (format!("provider: OpenAI\nmodel: gpt-4o\n{azure}\n{KEY}"), "spec.azure"),
        (
            format!(
                "provider: AzureOpenAI\nmodel: m\nbaseURL: https://a.openai.azure.com\nazure: {{deployment: chat, apiVersion: latest}}\n{KEY}"
            ),
            "spec.azure.apiVersion",
        ),
        (
            format!(
                "provider: AzureOpenAI\nmodel: m\nbaseURL: https://a.openai.azure.com\nazure: {{deployment: '-x', apiVersion: 2024-10-21}}\n{KEY}"
            ),
            "spec.azure.deployment",
        ),
        ("provider: Bedrock\nmodel: m".into(), "spec.bedrock"),
        (format!("provider: OpenAI\nmodel: m\nbedrock: {{region: us-east-1}}\n{KEY}"), "spec.bedrock"),
        ("provider: Bedrock\nmodel: m\nbedrock: {region: US-EAST-1}".into(), "spec.bedrock.region"),
        (
            "provider: Bedrock\nmodel: m\nbedrock: {region: us-east-1, accessKeySecretRef: {name: ''}}".into(),
            "spec.bedrock.accessKeySecretRef.name",
        ),
        (
            "provider: Bedrock\nmodel: m\nbedrock: {region: us-east-1}\napiKeySecretRef: {name: k, key: k}".into(),
            "spec.apiKeySecretRef",
        ),
        ("provider: OpenAI\nmodel: gpt-4o".into(), "spec.apiKeySecretRef"),
        ("provider: Gemini\nmodel: gemini".into(), "spec.apiKeySecretRef"),
        ("provider: OpenAI\nmodel: m\napiKeySecretRef: {name: k, key: ''}".into(), "spec.apiKeySecretRef.key"),
        (format!("provider: OpenAI\nmodel: gpt 4o\n{KEY}"), "spec.model"),
        (format!("provider: OpenAI\nmodel: ''\n{KEY}"), "spec.model"),
        (format!("provider: OpenAI\nmodel: {}\n{KEY}", "m".repeat(257)), "spec.model"),
        (format!("provider: OpenAI\nmodel: m\n{KEY}\nheaders:\n- {{name: X-Route}}"), "spec.headers[0]"),
        (
            format!(
                "provider: OpenAI\nmodel: m\n{KEY}\nheaders:\n- {{name: X-Route, value: a, secretKeyRef: {{name: s, key: k}}}}"
            ),
            "spec.headers[0]",
        ),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\nheaders:\n- {{name: x-api-key, value: sk-123}}"),
            "spec.headers[0].value",
        ),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\nheaders:\n- {{name: AUTHORIZATION, value: Bearer x}}"),
            "spec.headers[0].value",
        ),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\nheaders:\n- {{name: 'X Route', value: a}}"),
            "spec.headers[0].name",
        ),
        (
            format!(
                "provider: OpenAI\nmodel: m\n{KEY}\nheaders:\n- {{name: X-A, value: a}}\n- {{name: X-A, value: b}}"
            ),
            "spec.headers[1]",
        ),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\nheaders:\n{}", "- {name: X-A, value: a}\n".repeat(33)),
            "spec.headers",
        ),
        (format!("provider: OpenAI\nmodel: m\n{KEY}\ncaBundleRef: {{name: ca, key: ''}}"), "spec.caBundleRef.key"),
        (format!("provider: OpenAI\nmodel: m\n{KEY}\nparameters: {{temperature: 2.5}}"), "spec.parameters.temperature"),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\nparameters: {{maxOutputTokens: 0}}"),
            "spec.parameters.maxOutputTokens",
        ),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\ncapabilities: {{contextWindow: 0}}"),
            "spec.capabilities.contextWindow",
        ),
        (format!("provider: OpenAI\nmodel: m\n{KEY}\npricing: {{currency: usd}}"), "spec.pricing.currency"),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\npricing: {{currency: USD, inputPerMillion: '1e-3'}}"),
            "spec.pricing.inputPerMillion",
        ),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\npricing: {{currency: USD, outputPerMillion: '0.0000001'}}"),
            "spec.pricing.outputPerMillion",
        ),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\npricing: {{currency: CNY, cachedInputPerMillion: '-1'}}"),
            "spec.pricing.cachedInputPerMillion",
        ),
        (format!("provider: OpenAI\nmodel: m\n{KEY}\nprobeIntervalSeconds: 5"), "spec.probeIntervalSeconds"),
        (format!("provider: OpenAI\nmodel: m\n{KEY}\nprobeIntervalSeconds: 100000"), "spec.probeIntervalSeconds"),
        (
            format!("provider: OpenAI\nmodel: m\n{KEY}\nshare: {{readScope: {{accessLevel: User}}}}"),
            "spec.share.readScope.userUids",
        ),
        (format!("provider: OpenAI\nmodel: m\n{KEY}\nowner: {}", "u".repeat(129)), "spec.owner"),
    ];
    for (spec, field) in cases {
        let report = validate_model(&model(&spec));
        let fields: Vec<&str> = report.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec![field], "{spec}\n{:?}", report.errors);
        assert!(!report.errors[0].message.is_empty());
    }
}

#[test]
fn the_name_is_a_dns_label() {
    let mut bad = model(&format!("provider: OpenAI\nmodel: m\n{KEY}"));
    bad.metadata.name = Some("Team.A".into());
    let report = validate_model(&bad);
    assert_eq!(report.errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(), ["metadata.name"]);
}

#[test]
fn base_urls_are_https_or_http_to_loopback_and_cluster_services() {
    let admitted = [
        "https://api.openai.com/v1",
        "https://api.deepseek.com",
        "https://gw.example.com:8443/openai/v1/",
        "https://[2001:db8::1]/v1",
        "http://localhost:11434/v1",
        "http://127.0.0.1:8000/v1",
        "http://[::1]:8000",
        "http://vllm.models.svc:8000/v1",
        "http://vllm.models.svc.cluster.local/v1",
    ];
    let refused = [
        "http://api.example.com/v1",
        "http://vllm:8000/v1",
        "http://svc/v1",
        "http://10.0.0.5:8000/v1",
        "http://vllm.svc.example.com/v1",
        "https://user@example.com",
        "https://example.com/v1#x",
        "https://example.com/v1?x=1",
        "https://exa mple.com",
        "https:///v1",
        "example.com",
        "HTTPS://example.com",
    ];
    for url in admitted {
        assert!(matches(BASE_URL_PATTERN, url), "{url} is admitted");
    }
    for url in refused {
        assert!(!matches(BASE_URL_PATTERN, url), "{url} is refused");
    }
}

/// The schema node at `path` (`spec.azure.apiVersion`) of the Model CRD.
fn schema_at(path: &str) -> &'static Value {
    let mut node = crd::schema("Model").expect("the Model CRD");
    for key in path.split('.') {
        node = &node["properties"][key];
    }
    node
}

#[test]
fn the_schemas_patterns_are_the_modules() {
    let patterns = [
        ("spec.model", MODEL_ID_PATTERN),
        ("spec.azure.deployment", DEPLOYMENT_PATTERN),
        ("spec.azure.apiVersion", API_VERSION_PATTERN),
        ("spec.bedrock.region", REGION_PATTERN),
        ("spec.pricing.currency", CURRENCY_PATTERN),
        ("spec.pricing.inputPerMillion", model::PRICE_PATTERN),
        ("spec.pricing.outputPerMillion", model::PRICE_PATTERN),
        ("spec.pricing.cachedInputPerMillion", model::PRICE_PATTERN),
    ];
    for (path, pattern) in patterns {
        assert_eq!(schema_at(path)["pattern"], pattern, "{path}");
    }
    assert_eq!(schema_at("spec.headers")["items"]["properties"]["name"]["pattern"], HEADER_NAME_PATTERN);
}

#[test]
fn the_cel_rules_carry_the_modules_pattern_and_header_names() {
    assert!(BASE_URL_RULE.contains(&format!("r\"{BASE_URL_PATTERN}\"")), "{BASE_URL_RULE}");
    let rules = &schema_at("spec.headers")["items"]["x-kubernetes-validations"];
    let credential_rule = rules.as_array().expect("rules").iter().find(|r| r["fieldPath"] == ".value").expect("a rule");
    let text = credential_rule["rule"].as_str().expect("a rule");
    for name in CREDENTIAL_HEADERS {
        assert!(text.contains(&format!("'{name}'")), "{name} is in {text}");
    }
    assert_eq!(text.matches("', '").count() + 1, CREDENTIAL_HEADERS.len(), "{text}");
    let spec_rules = schema_at("spec")["x-kubernetes-validations"].as_array().expect("rules").len();
    assert_eq!(spec_rules, 9, "every spec rule is mirrored in validate_model");
}

#[test]
fn the_hosted_presets_of_the_cel_rule_are_those_with_a_url() {
    let rule = schema_at("spec")["x-kubernetes-validations"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| r["message"] == COMPATIBLE_BASE_URL_MESSAGE)
        .expect("the rule")["rule"]
        .as_str()
        .expect("text")
        .to_string();
    let presets = schema_at("spec.preset")["enum"].as_array().expect("an enum").clone();
    assert_eq!(presets.len(), 7);
    for preset in presets {
        let preset: crate::resources::ModelPreset = serde_json::from_value(preset).expect("a preset");
        let listed = rule.contains(&format!("'{}'", preset.as_str()));
        assert_eq!(listed, preset_base_url(preset).is_some(), "{preset:?} in {rule}");
    }
}
