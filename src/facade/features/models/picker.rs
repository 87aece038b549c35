//! `GET /api/system/model-providers/models/v2?model_type=chat`: the models a person may pick, as Yuxi's
//! model selector reads them: `{success, data: {<provider_id>: {provider_id, provider_display_name,
//! models: [{spec, model_id, display_name, dimension, batch_size}]}}}`. Chat models only: this system
//! runs no embedding or rerank models of its own, so those lists are empty.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::state::FacadeState;

/// The provider entry the Model resources are listed under (their `spec` is the Model's name).
pub const MODELS_PROVIDER: &str = "models";

/// The kinds of model Yuxi's client asks for.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ModelType {
    /// Chat models: the ones listed.
    Chat,
    /// Embedding models: none.
    Embedding,
    /// Rerank models: none.
    Rerank,
}

/// The query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ModelsQuery {
    /// `chat` (the default), `embedding` or `rerank`; anything else answers 422.
    #[serde(default)]
    #[param(inline, value_type = Option<ModelType>)]
    model_type: Option<String>,
}

/// One model.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PickerModel {
    /// `<provider>/<model>`: what a run's `model_spec` takes.
    pub spec: String,
    /// The model, without its provider.
    pub model_id: String,
    /// The name shown.
    pub display_name: String,
    /// Always `null` (an embedding model's).
    pub dimension: Option<u32>,
    /// Always `null` (an embedding model's).
    pub batch_size: Option<u32>,
}

/// One provider's models.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PickerProvider {
    /// The provider: a spec's first part.
    pub provider_id: String,
    /// The name shown.
    pub provider_display_name: String,
    /// Its models, the default first.
    pub models: Vec<PickerModel>,
}

/// The answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PickerList {
    /// Always true.
    pub success: bool,
    /// The providers, by id.
    pub data: BTreeMap<String, PickerProvider>,
}

/// `GET /api/system/model-providers/models/v2`.
#[utoipa::path(
    get,
    path = "/api/system/model-providers/models/v2",
    operation_id = "list_models",
    tag = "catalogue",
    params(ModelsQuery),
    responses(
        (status = 200, description = "the models, by provider", body = PickerList),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
        (status = 422, description = "`query.model_type` is not `chat`, `embedding` or `rerank`", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn models_v2(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ModelsQuery>,
) -> Result<Json<PickerList>, ApiError> {
    let mut data = BTreeMap::new();
    match query.model_type.as_deref().unwrap_or("chat") {
        "chat" => {
            for provider in state.models.by_provider() {
                let models = provider
                    .models
                    .into_iter()
                    .map(|m| PickerModel {
                        spec: m.spec,
                        model_id: m.model_id,
                        display_name: m.display_name,
                        dimension: None,
                        batch_size: None,
                    })
                    .collect();
                data.insert(
                    provider.provider_id.clone(),
                    PickerProvider {
                        provider_id: provider.provider_id,
                        provider_display_name: provider.display_name,
                        models,
                    },
                );
            }
            // The Model resources the caller may run on, under their own provider entry.
            let usable = crate::facade::services::model_access::usable_models(&state, &who).await?;
            if !usable.is_empty() {
                let models = usable
                    .iter()
                    .map(|m| PickerModel {
                        spec: m.metadata.name.clone().unwrap_or_default(),
                        model_id: m.spec.model.clone(),
                        display_name: m.spec.display_name.clone().unwrap_or_else(|| {
                            format!("{} ({})", m.metadata.name.as_deref().unwrap_or_default(), m.spec.provider.as_str())
                        }),
                        dimension: None,
                        batch_size: None,
                    })
                    .collect();
                data.insert(
                    MODELS_PROVIDER.to_string(),
                    PickerProvider {
                        provider_id: MODELS_PROVIDER.to_string(),
                        provider_display_name: "Models".to_string(),
                        models,
                    },
                );
            }
        }
        "embedding" | "rerank" => {}
        other => {
            return Err(ApiError::invalid("query.model_type", format!("{other:?} is not chat, embedding or rerank")));
        }
    }
    Ok(Json(PickerList { success: true, data }))
}
