//! The local mode's Models: those of the manifests folder, each connected with the values its
//! references name, looked up as the local mode has no Secrets of a cluster:
//! - a Secret's key from the variable `YUXI_SECRET_<NAME>_<KEY>` (the Secret's name and the key in
//!   capitals, every character other than a letter or digit as `_`: `model-keys`/`deepseek` is
//!   `YUXI_SECRET_MODEL_KEYS_DEEPSEEK`), else from the secrets file (`--secrets`: v1 Secret manifests,
//!   `data` or `stringData`, readable by its owner only);
//! - a ConfigMap's key (a CA bundle) from the ConfigMaps of the manifests folder.
//!
//! A Model whose value is not there is still listed; a run on it fails naming the variable to set.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use yuxi_operator::endpoints::connection::{Connection, ConnectionError};
use yuxi_operator::facade::services::launch::local::ModelInputs;
use yuxi_operator::resources::Model;
use yuxi_operator::resources::model::secrets::{Reference, Source};

/// The variable a Secret's key is looked up in.
pub fn secret_variable(name: &str, key: &str) -> String {
    let upper = |s: &str| {
        s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect::<String>()
    };
    format!("YUXI_SECRET_{}_{}", upper(name), upper(key))
}

/// The Secrets of the secrets file, by name, then key.
#[derive(Default)]
pub struct LocalSecrets(HashMap<String, BTreeMap<String, String>>);

impl LocalSecrets {
    /// The Secrets of `path` (none without one).
    ///
    /// Errors: the file cannot be read, is readable by others than its owner, or holds something other
    /// than v1 Secrets.
    pub fn load(path: Option<&Path>) -> anyhow::Result<LocalSecrets> {
        let Some(path) = path else { return Ok(LocalSecrets::default()) };
        let metadata = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("--secrets {}: {e}", path.display()))?;
        if metadata.permissions().mode() & 0o077 != 0 {
            anyhow::bail!(
                "--secrets {}: is readable by others than its owner (mode {:o}); chmod 600 it",
                path.display(),
                metadata.permissions().mode() & 0o777
            );
        }
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--secrets {}: {e}", path.display()))?;
        let mut secrets = HashMap::new();
        for (index, document) in serde_norway::Deserializer::from_str(&text).enumerate() {
            let value: serde_json::Value = serde::Deserialize::deserialize(document)
                .map_err(|e| anyhow::anyhow!("--secrets {} document {index}: {e}", path.display()))?;
            if value.is_null() {
                continue;
            }
            let secret: Secret = serde_json::from_value(value)
                .map_err(|e| anyhow::anyhow!("--secrets {} document {index}: not a v1 Secret: {e}", path.display()))?;
            let mut values: BTreeMap<String, String> = BTreeMap::new();
            for (key, bytes) in secret.data.iter().flatten() {
                values.insert(key.clone(), String::from_utf8_lossy(&bytes.0).into_owned());
            }
            values.extend(secret.string_data.clone().unwrap_or_default());
            // No captured content of a span carries one.
            values.values().for_each(|value| yuxi_operator::telemetry::register_secret(value));
            secrets.insert(secret.name_any(), values);
        }
        Ok(LocalSecrets(secrets))
    }

    /// The value of `key` of the Secret `name`: its variable when set, else the file's.
    pub fn get(&self, name: &str, key: &str) -> Option<String> {
        std::env::var(secret_variable(name, key)).ok().or_else(|| self.0.get(name)?.get(key).cloned())
    }
}

fn lookup<'a>(secrets: &'a LocalSecrets, config_maps: &'a [ConfigMap]) -> impl Fn(&Reference) -> Option<String> + 'a {
    move |reference: &Reference| match reference.source {
        Source::Secret => secrets.get(&reference.name, &reference.key),
        Source::ConfigMap => config_maps
            .iter()
            .find(|map| map.name_any() == reference.name)
            .and_then(|map| map.data.as_ref()?.get(&reference.key).cloned()),
    }
}

/// What a `runner` subprocess of a run on each Model gets (`--runner-processes`): the manifest and the
/// values found, by the Model's name.
pub fn subprocess_inputs(
    models: &[Model],
    secrets: &LocalSecrets,
    config_maps: &[ConfigMap],
) -> anyhow::Result<BTreeMap<String, ModelInputs>> {
    let lookup = lookup(secrets, config_maps);
    let mut inputs = BTreeMap::new();
    for model in models {
        let variables = yuxi_operator::resources::model::secrets::references(&model.spec)
            .iter()
            .filter_map(|reference| Some((reference.env_name(), lookup(reference)?)))
            .collect();
        let manifest = serde_norway::to_string(model)?;
        inputs.insert(model.name_any(), ModelInputs { manifest, variables });
    }
    Ok(inputs)
}

/// Each Model of `models`, connected with `secrets` and the manifests' `config_maps`, by name.
pub fn connect_all(
    models: &[Model],
    secrets: &LocalSecrets,
    config_maps: &[ConfigMap],
) -> BTreeMap<String, Result<Connection, ConnectionError>> {
    let lookup = lookup(secrets, config_maps);
    let hint = |reference: &Reference| match reference.source {
        Source::Secret => format!(
            ": set {} or add the Secret to the --secrets file",
            secret_variable(&reference.name, &reference.key)
        ),
        Source::ConfigMap => ": add the ConfigMap to the manifests folder".to_string(),
    };
    models
        .iter()
        .map(|model| (model.name_any(), Connection::from_spec(&model.name_any(), &model.spec, &lookup, hint)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_key_is_looked_up_in_its_variable() {
        assert_eq!(secret_variable("model-keys", "deepseek"), "YUXI_SECRET_MODEL_KEYS_DEEPSEEK");
        assert_eq!(secret_variable("a.b", "api-key"), "YUXI_SECRET_A_B_API_KEY");
    }

    #[test]
    fn a_secrets_file_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("secrets.yaml");
        std::fs::write(&path, "apiVersion: v1\nkind: Secret\nmetadata: {name: keys}\nstringData: {a: b}\n")
            .expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = LocalSecrets::load(Some(&path)).err().expect("refused");
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let secrets = LocalSecrets::load(Some(&path)).expect("loads");
        assert_eq!(secrets.get("keys", "a").as_deref(), Some("b"));
    }
}
