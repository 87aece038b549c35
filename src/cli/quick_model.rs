//! The model the local mode's facade asks for `POST /api/chat/call`: the runner's model client, with the
//! local mode's default model and scripts (here because this layer holds both the facade and the runner).

use std::time::Duration;

use yuxi_operator::facade::services::quick_model::QuickModel;
use yuxi_operator::run::message::Message;
use yuxi_operator::runner::model::{Model, ModelSettings, scripted};

/// How long a quick question may take.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// The runner's models, asked one question at a time.
#[derive(Debug)]
pub struct RunnerModels {
    /// The model of a question that names none.
    pub default_model: String,
    /// Where the models come from; the Model resources change as the manifests folder does.
    pub settings: std::sync::RwLock<ModelSettings>,
}

impl RunnerModels {
    /// Puts the manifests' Models (connected) in place of the former ones.
    pub fn set_resources(&self, resources: super::in_process::ModelResources) {
        self.settings.write().unwrap_or_else(std::sync::PoisonError::into_inner).resources = resources;
    }
}

impl QuickModel for RunnerModels {
    fn default_model(&self) -> String {
        self.default_model.clone()
    }

    fn answer(
        &self,
        model: Option<String>,
        query: String,
    ) -> futures::future::BoxFuture<'static, Result<(String, Option<yuxi_operator::resources::TokenUsage>), String>>
    {
        let id = model.unwrap_or_else(|| self.default_model.clone());
        // `scripted/auto` has no agent here: it is `scripted/echo`.
        let settings = self.settings.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let id = scripted::pick_auto(&id, "", settings.scripts_dir.as_deref());
        Box::pin(async move {
            // The caller is told which model failed, not this machine's paths or the endpoint's words:
            // those go to the log.
            let model = Model::resolve(&id, &settings).map_err(|e| {
                tracing::warn!(model = %id, error = %e, "the chat call's model cannot be used");
                format!("model {id:?} cannot be used here")
            })?;
            let (deltas, _unread) = tokio::sync::mpsc::unbounded_channel();
            let turn =
                tokio::time::timeout(ANSWER_WITHIN, model.complete(&[Message::User { content: query }], &[], &deltas))
                    .await
                    .map_err(|_| format!("model {id:?} did not answer within {} s", ANSWER_WITHIN.as_secs()))?
                    .map_err(|e| {
                        tracing::warn!(model = %id, error = %e, "the chat call's model failed");
                        format!("model {id:?} failed")
                    })?;
            Ok((turn.content, turn.usage))
        })
    }
}
