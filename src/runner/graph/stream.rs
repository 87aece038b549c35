//! One model call as it streams: its text forwarded in batched `messages` events, and its span
//! (`chat <model>`, when traces are exported) with its tokens, cost, finish and time to the first token.

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::batch::{BATCH_CHARS, Batch};
use super::{Graph, Stop};
use crate::run::EventKind;
use crate::run::message::Message;
use crate::run::timeline::{MODEL_CALL_EVENT, ModelCallEvent};
use crate::runner::model::{ModelError, ModelTurn};

impl Graph {
    /// Runs one model call while forwarding its deltas in batches.
    pub(super) async fn stream_turn(
        &self,
        messages: &[Message],
        specs: &[crate::runner::tools::ToolSpec],
        message_id: &str,
    ) -> Result<(Result<ModelTurn, ModelError>, ModelCallEvent), Stop> {
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
            gen_ai.input.messages = tracing::field::Empty,
            gen_ai.output.messages = tracing::field::Empty,
        );
        // With content capture on: what is new in this call (after the model's last turn).
        if !span.is_disabled() {
            let new_from = messages.iter().rposition(|m| matches!(m, Message::Assistant { .. })).map_or(0, |at| at + 1);
            let input = serde_json::to_string(&messages[new_from..]).unwrap_or_default();
            if let Some(input) = crate::telemetry::content(&input) {
                span.record("gen_ai.input.messages", input);
            }
        }
        let started = Instant::now();
        let started_at = jiff::Timestamp::now();
        let mut first_token: Option<u64> = None;
        let call = tracing::Instrument::instrument(self.model.complete(messages, specs, &sender), span.clone());
        tokio::pin!(call);
        let mut batch = Batch::default();
        let result = loop {
            let flush_at = batch.flush_at();
            tokio::select! {
                biased;
                Some(delta) = receiver.recv() => {
                    mark_first_token(&mut first_token, started, &span);
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
            // A token that came with the call's end came no later than it.
            mark_first_token(&mut first_token, started, &span);
            batch.push(delta);
        }
        self.flush(&mut batch, message_id).await?;
        let mut call = ModelCallEvent {
            kind: MODEL_CALL_EVENT.into(),
            started_at: started_at.to_string(),
            duration_ms: started.elapsed().as_millis() as u64,
            time_to_first_token_ms: first_token,
            model: self.model_id.clone(),
            provider: self.provider.clone(),
            ..Default::default()
        };
        record_turn(&span, &mut call, &result, self.pricing.as_ref());
        // The run's own record of the call, for its timeline (`crate::run::timeline`).
        self.emit(EventKind::Custom, crate::run::event::payload(&call)).await?;
        Ok((result, call))
    }

    pub(super) async fn flush(&self, batch: &mut Batch, message_id: &str) -> Result<(), Stop> {
        if let Some(payload) = batch.take(message_id) {
            self.emit(EventKind::Messages, payload).await?;
        }
        Ok(())
    }
}

/// Notes the time to the first token (in `first_token` and on `span`) when it is the first.
fn mark_first_token(first_token: &mut Option<u64>, started: Instant, span: &tracing::Span) {
    if first_token.is_none() {
        let elapsed = started.elapsed().as_millis() as u64;
        *first_token = Some(elapsed);
        span.record("yuxi.time_to_first_token_ms", elapsed as i64);
    }
}

/// What a model call's span and its record (`call`) say once it ended: its tokens, cost and finish,
/// or why it failed.
fn record_turn(
    span: &tracing::Span,
    call: &mut ModelCallEvent,
    result: &Result<ModelTurn, ModelError>,
    pricing: Option<&crate::resources::model::ModelPricing>,
) {
    match result {
        Ok(turn) => {
            if let Some(usage) = &turn.usage {
                span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
                span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
                span.record("gen_ai.usage.cache_read.input_tokens", usage.cached_prompt_tokens);
                (call.input_tokens, call.output_tokens) = (usage.prompt_tokens, usage.completion_tokens);
                call.cached_tokens = usage.cached_prompt_tokens;
                if let Some((currency, picos)) = crate::resources::model::cost_picos(usage, pricing) {
                    let cost = format!("{} {currency}", crate::resources::model::format_picos(picos));
                    span.record("yuxi.cost", &cost);
                    call.cost = Some(cost);
                }
            }
            if !span.is_disabled()
                && let Some(output) = crate::telemetry::content(&turn.content)
            {
                span.record("gen_ai.output.messages", output);
            }
            let finish = if turn.tool_calls.is_empty() { "stop" } else { "tool_calls" };
            span.record("gen_ai.response.finish_reasons", finish);
            call.finish_reason = Some(finish.into());
        }
        Err(err) => {
            let kind = if err.is_transient() { "transient" } else { "fatal" };
            span.record("otel.status_code", "ERROR");
            span.record("error.type", kind);
            call.error = Some(kind.into());
        }
    }
}
