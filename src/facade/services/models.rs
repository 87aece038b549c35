//! The models this installation runs ([`ModelCatalog`]), from its configuration: the model of agents that
//! name none (`--default-model`) and the others runs may be given (`--models`), each a model spec
//! (`<provider>/<model>`, the spelling a run's `model_spec` takes). The model picker lists them by
//! provider (`GET /api/system/model-providers/models/v2`) and the settings page shows the default
//! (`GET /api/system/config`). The facade does not call the models: the runs do.

use crate::facade::services::request_fields::is_model_spec;

/// The models this installation runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelCatalog {
    default_model: Option<String>,
    models: Vec<String>,
    openai_base_url: Option<String>,
}

/// One model, as the picker shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedModel {
    /// Its spec, `<provider>/<model>`: what a run's `model_spec` takes.
    pub spec: String,
    /// The model, without its provider.
    pub model_id: String,
    /// The name shown: the model, and `(default)` for the default one.
    pub display_name: String,
}

/// The models of one provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderModels {
    /// The provider (`openai`, `scripted`): a spec's first part.
    pub provider_id: String,
    /// The name shown: for `openai` the endpoint's host, for `scripted` that it works offline.
    pub display_name: String,
    /// Its models, the default first, then in the order configured.
    pub models: Vec<ListedModel>,
}

impl ModelCatalog {
    /// The catalog of `default_model` and `models`, `openai/` models served by `openai_base_url` (OpenAI's
    /// own when `None`). Errors: a model that is not a spec, naming it and the flag it came from.
    pub fn new(
        default_model: Option<String>,
        models: Vec<String>,
        openai_base_url: Option<String>,
    ) -> Result<Self, String> {
        if let Some(model) = default_model.as_deref().filter(|m| !is_model_spec(m)) {
            return Err(format!("--default-model {model:?} is not <provider>/<model>"));
        }
        let mut listed: Vec<String> = Vec::new();
        for model in models.into_iter().map(|m| m.trim().to_string()).filter(|m| !m.is_empty()) {
            if !is_model_spec(&model) {
                return Err(format!("--models: {model:?} is not <provider>/<model>"));
            }
            if default_model.as_deref() != Some(model.as_str()) && !listed.contains(&model) {
                listed.push(model);
            }
        }
        Ok(Self { default_model, models: listed, openai_base_url })
    }

    /// Whether `spec` is one of the models this installation offers (the default or one of `--models`).
    pub fn offers(&self, spec: &str) -> bool {
        self.default_model.as_deref() == Some(spec) || self.models.iter().any(|m| m == spec)
    }

    /// The model of agents that name none, if one is configured.
    pub fn default_model(&self) -> Option<&str> {
        self.default_model.as_deref()
    }

    /// Every model, by provider (sorted by provider id); the default first within its provider.
    pub fn by_provider(&self) -> Vec<ProviderModels> {
        let mut providers: std::collections::BTreeMap<String, ProviderModels> = Default::default();
        for spec in self.default_model.iter().chain(&self.models) {
            let Some((provider, model)) = spec.split_once('/') else { continue };
            let default = self.default_model.as_deref() == Some(spec.as_str());
            providers
                .entry(provider.to_string())
                .or_insert_with(|| ProviderModels {
                    provider_id: provider.to_string(),
                    display_name: self.provider_name(provider),
                    models: Vec::new(),
                })
                .models
                .push(ListedModel {
                    spec: spec.clone(),
                    model_id: model.to_string(),
                    display_name: if default { format!("{model} (default)") } else { model.to_string() },
                });
        }
        providers.into_values().collect()
    }

    fn provider_name(&self, provider: &str) -> String {
        match provider {
            "openai" => {
                let host = self
                    .openai_base_url
                    .as_deref()
                    .and_then(|url| url.split("://").nth(1))
                    .and_then(|rest| rest.split(['/', '?']).next())
                    .and_then(|authority| authority.rsplit('@').next())
                    .unwrap_or("api.openai.com");
                format!("OpenAI-compatible ({host})")
            }
            "scripted" => "Scripted (offline)".to_string(),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_are_listed_by_provider_the_default_first_once_each() {
        let catalog = ModelCatalog::new(
            Some("openai/gpt-4o-mini".into()),
            vec!["scripted/echo".into(), " openai/gpt-4o ".into(), "openai/gpt-4o-mini".into(), "".into()],
            Some("https://user:key@llm.example.com:8443/v1".into()),
        )
        .expect("a catalog");
        let providers = catalog.by_provider();
        let listed: Vec<(&str, &str, Vec<&str>)> = providers
            .iter()
            .map(|p| {
                (p.provider_id.as_str(), p.display_name.as_str(), p.models.iter().map(|m| m.spec.as_str()).collect())
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("openai", "OpenAI-compatible (llm.example.com:8443)", vec!["openai/gpt-4o-mini", "openai/gpt-4o"]),
                ("scripted", "Scripted (offline)", vec!["scripted/echo"]),
            ]
        );
        assert_eq!(providers[0].models[0].display_name, "gpt-4o-mini (default)");
        assert_eq!(providers[0].models[1].model_id, "gpt-4o");
        assert_eq!(catalog.default_model(), Some("openai/gpt-4o-mini"));
        assert!(ModelCatalog::default().by_provider().is_empty());
        assert_eq!(
            ModelCatalog::new(None, vec!["openai/x".into()], None).unwrap().by_provider()[0].display_name,
            "OpenAI-compatible (api.openai.com)"
        );
    }

    #[test]
    fn a_model_that_is_not_a_spec_is_refused_naming_its_flag() {
        assert_eq!(
            ModelCatalog::new(Some("gpt-4o".into()), vec![], None).unwrap_err(),
            "--default-model \"gpt-4o\" is not <provider>/<model>"
        );
        assert_eq!(
            ModelCatalog::new(None, vec!["scripted/echo".into(), "gpt 4".into()], None).unwrap_err(),
            "--models: \"gpt 4\" is not <provider>/<model>"
        );
    }
}
