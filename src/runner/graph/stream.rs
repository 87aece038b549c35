//! One model call as it streams: its text forwarded in batched `messages` events, and its span
//! (`chat <model>`, when traces are exported) with its tokens, cost, finish and time to the first token.

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::batch::{BATCH_CHARS, Batch};
use super::{Graph, Stop};
use crate::run::EventKind;
use crate::run::message::Message;
use crate::runner::model::{ModelError, ModelTurn};

impl Graph {
    /// Runs one model call while forwarding its deltas in batches.
    pub(super) async fn stream_turn(
        &self,
        messages: &[Message],
        specs: &[crate::runner::tools::ToolSpec],
        message_id: &str,
    ) -> Result<Result<ModelTurn, ModelError>, Stop> {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let span = tracing::trace_span!(
            target: crate::telemetry::TARGET,
            "chat",
            otel.name = %format!("chat {}", self.model_id),
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = %self.provider,
            gen_ai.request.model = %self.model_id,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            yuxi.cost = tracing::field::Empty,
            yuxi.time_to_first_token_ms = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let started = Instant::now();
        let mut first_token = false;
        let call = tracing::Instrument::instrument(self.model.complete(messages, specs, &sender), span.clone());
        tokio::pin!(call);
        let mut batch = Batch::default();
        let result = loop {
            let flush_at = batch.flush_at();
            tokio::select! {
                biased;
                Some(delta) = receiver.recv() => {
                    if !first_token {
                        first_token = true;
                        span.record("yuxi.time_to_first_token_ms", started.elapsed().as_millis() as u64);
                    }
                    batch.push(delta);
                    if batch.chars() >= BATCH_CHARS {
                        self.flush(&mut batch, message_id).await?;
                    }
                }
                result = &mut call => break result,
                () = tokio::time::sleep_until(flush_at.unwrap_or_else(Instant::now)), if flush_at.is_some() => {
                    self.flush(&mut batch, message_id).await?;
                }
            }
        };
        while let Ok(delta) = receiver.try_recv() {
            batch.push(delta);
        }
        self.flush(&mut batch, message_id).await?;
        record_turn(&span, &result, self.pricing.as_ref());
        Ok(result)
    }

    pub(super) async fn flush(&self, batch: &mut Batch, message_id: &str) -> Result<(), Stop> {
        if let Some(payload) = batch.take(message_id) {
            self.emit(EventKind::Messages, payload).await?;
        }
        Ok(())
    }
}

/// What a model call's span says once it ended: its tokens, cost and finish, or why it failed.
fn record_turn(
    span: &tracing::Span,
    result: &Result<ModelTurn, ModelError>,
    pricing: Option<&crate::resources::model::ModelPricing>,
) {
    match result {
        Ok(turn) => {
            if let Some(usage) = &turn.usage {
                span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
                span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
                span.record("gen_ai.usage.cache_read.input_tokens", usage.cached_prompt_tokens);
                if let Some((currency, picos)) = crate::resources::model::cost_picos(usage, pricing) {
                    span.record("yuxi.cost", format!("{} {currency}", crate::resources::model::format_picos(picos)));
                }
            }
            span.record(
                "gen_ai.response.finish_reasons",
                if turn.tool_calls.is_empty() { "stop" } else { "tool_calls" },
            );
        }
        Err(err) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", if err.is_transient() { "transient" } else { "fatal" });
        }
    }
}
