//! The Secret and ConfigMap keys a Model references, each with the field that names it and the variable
//! that carries its value into the runner container of a run on the Model ([`references`]). The
//! controller turns these into `secretKeyRef`/`configMapKeyRef` variables of that container only; the
//! runner reads them back by the same names; the local mode resolves them by Secret name and key.

use super::ModelSpec;

/// Where a referenced value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A key of a Secret of the Model's namespace.
    Secret,
    /// A key of a ConfigMap of the Model's namespace.
    ConfigMap,
}

/// What a referenced value is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// The API key (`apiKeySecretRef`).
    ApiKey,
    /// The value of the extra header at this index of `headers`.
    Header(usize),
    /// Bedrock's access key id.
    AwsAccessKeyId,
    /// Bedrock's secret access key.
    AwsSecretAccessKey,
    /// Bedrock's session token.
    AwsSessionToken,
    /// The CA bundle's PEM (`caBundleRef`).
    CaBundle,
}

/// One value a Model references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// What it is for.
    pub purpose: Purpose,
    /// The field that names it (`spec.apiKeySecretRef`, `spec.headers[1].secretKeyRef`).
    pub field: String,
    /// A Secret's or a ConfigMap's key.
    pub source: Source,
    /// The object's name.
    pub name: String,
    /// The key within it.
    pub key: String,
    /// Whether the run may go on without it (a session token that is not there).
    pub optional: bool,
}

impl Reference {
    /// The runner container's variable carrying the value: `YUXI_MODEL_API_KEY`,
    /// `YUXI_MODEL_HEADER_<index>`, `YUXI_MODEL_AWS_ACCESS_KEY_ID`, `YUXI_MODEL_AWS_SECRET_ACCESS_KEY`,
    /// `YUXI_MODEL_AWS_SESSION_TOKEN`, `YUXI_MODEL_CA_BUNDLE`.
    pub fn env_name(&self) -> String {
        env_name(self.purpose)
    }
}

/// The runner container's variable of a value for `purpose` (see [`Reference::env_name`]).
pub fn env_name(purpose: Purpose) -> String {
    match purpose {
        Purpose::ApiKey => "YUXI_MODEL_API_KEY".to_string(),
        Purpose::Header(index) => format!("YUXI_MODEL_HEADER_{index}"),
        Purpose::AwsAccessKeyId => "YUXI_MODEL_AWS_ACCESS_KEY_ID".to_string(),
        Purpose::AwsSecretAccessKey => "YUXI_MODEL_AWS_SECRET_ACCESS_KEY".to_string(),
        Purpose::AwsSessionToken => "YUXI_MODEL_AWS_SESSION_TOKEN".to_string(),
        Purpose::CaBundle => "YUXI_MODEL_CA_BUNDLE".to_string(),
    }
}

/// Every value `spec` references, in a fixed order: the API key, the headers' Secrets, Bedrock's key
/// pair and session token, the CA bundle.
pub fn references(spec: &ModelSpec) -> Vec<Reference> {
    let secret = |purpose, field: String, name: &str, key: &str, optional| Reference {
        purpose,
        field,
        source: Source::Secret,
        name: name.to_string(),
        key: key.to_string(),
        optional,
    };
    let mut found = Vec::new();
    if let Some(key) = &spec.api_key_secret_ref {
        found.push(secret(Purpose::ApiKey, "spec.apiKeySecretRef".into(), &key.name, &key.key, false));
    }
    for (index, header) in spec.headers.iter().enumerate() {
        if let Some(key) = &header.secret_key_ref {
            let field = format!("spec.headers[{index}].secretKeyRef");
            found.push(secret(Purpose::Header(index), field, &key.name, &key.key, false));
        }
    }
    if let Some(keys) = spec.bedrock.as_ref().and_then(|b| b.access_key_secret_ref.as_ref()) {
        let field = "spec.bedrock.accessKeySecretRef".to_string();
        let id = keys.access_key_id_key.as_deref().unwrap_or("AWS_ACCESS_KEY_ID");
        let secret_key = keys.secret_access_key_key.as_deref().unwrap_or("AWS_SECRET_ACCESS_KEY");
        found.push(secret(Purpose::AwsAccessKeyId, field.clone(), &keys.name, id, false));
        found.push(secret(Purpose::AwsSecretAccessKey, field.clone(), &keys.name, secret_key, false));
        if let Some(token) = &keys.session_token_key {
            found.push(secret(Purpose::AwsSessionToken, field, &keys.name, token, false));
        }
    }
    if let Some(bundle) = &spec.ca_bundle_ref {
        found.push(Reference {
            purpose: Purpose::CaBundle,
            field: "spec.caBundleRef".into(),
            source: Source::ConfigMap,
            name: bundle.name.clone(),
            key: bundle.key.clone(),
            optional: false,
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_is_listed_with_its_field_and_variable() {
        let spec: ModelSpec = serde_norway::from_str(
            "provider: Bedrock\nmodel: m\nbedrock:\n  region: us-east-1\n  accessKeySecretRef:\n    name: aws\n    sessionTokenKey: token\nheaders:\n- name: X-Plain\n  value: v\n- name: X-Route\n  secretKeyRef: {name: gateway, key: route}\ncaBundleRef: {name: roots, key: ca.crt}",
        )
        .expect("a spec");
        let found: Vec<(String, String, String, String)> =
            references(&spec).iter().map(|r| (r.field.clone(), r.name.clone(), r.key.clone(), r.env_name())).collect();
        let expected = [
            ("spec.headers[1].secretKeyRef", "gateway", "route", "YUXI_MODEL_HEADER_1"),
            ("spec.bedrock.accessKeySecretRef", "aws", "AWS_ACCESS_KEY_ID", "YUXI_MODEL_AWS_ACCESS_KEY_ID"),
            ("spec.bedrock.accessKeySecretRef", "aws", "AWS_SECRET_ACCESS_KEY", "YUXI_MODEL_AWS_SECRET_ACCESS_KEY"),
            ("spec.bedrock.accessKeySecretRef", "aws", "token", "YUXI_MODEL_AWS_SESSION_TOKEN"),
            ("spec.caBundleRef", "roots", "ca.crt", "YUXI_MODEL_CA_BUNDLE"),
        ]
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string()));
        assert_eq!(found, expected);
        let keyed: ModelSpec =
            serde_norway::from_str("provider: OpenAI\nmodel: m\napiKeySecretRef: {name: k, key: openai}")
                .expect("a spec");
        assert_eq!(references(&keyed)[0].env_name(), "YUXI_MODEL_API_KEY");
        assert_eq!(references(&keyed)[0].source, Source::Secret);
    }
}
