//! The model `POST /api/chat/call` asks ([`QuickModel`]). The facade holds no model client of its own:
//! the command line layer, which holds the runner's, gives it one; a facade without one (in a cluster,
//! model credentials are the runs') answers 503.

/// Answers one question with a model: `model` (`<provider>/<model>`), or the default one.
pub trait QuickModel: Send + Sync + std::fmt::Debug {
    /// The model a question that names none is asked (`<provider>/<model>`).
    fn default_model(&self) -> String;

    /// The model's whole answer to `query` and the tokens it took when the model says, or why there is
    /// none (the model is unknown, its endpoint failed).
    fn answer(
        &self,
        model: Option<String>,
        query: String,
    ) -> futures::future::BoxFuture<'static, Result<(String, Option<crate::resources::TokenUsage>), String>>;
}
