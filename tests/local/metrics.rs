//! The run and model metrics of `/metrics`, with each store: after a deep-research run (a parent and
//! two children), its runs' ends, durations, queue waits and times to a first event, and its model
//! calls' latencies and times to a first token are counted under the agent and the model, as
//! Prometheus histograms.

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::local_mode::{LocalStore, command_over, free_port, launch};
use crate::support::repository::root;

/// The value of the sample `name{labels}` (its labels in the order they are written), if any.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name_and_labels)?.trim().parse().ok())
}

async fn a_deep_research_tree_is_counted_in_the_run_and_model_metrics(store: LocalStore) {
    let port = free_port();
    let data = TempDir::new().expect("dir");
    let local = launch(
        command_over(&root().join("examples"), store, port, data.path()),
        port,
        data,
        TempDir::new().expect("dir"),
    )
    .await;
    let response = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .json(&json!({"query": "Which electrolytes?", "agent_slug": "deep-research"}))
        .send()
        .await
        .expect("reaches");
    let run_id = response.json::<Value>().await.expect("json")["run_id"].as_str().expect("run_id").to_string();
    assert_eq!(local.result_of(&run_id, "alice-token").await["status"], "completed");
    let text =
        local.client.get(format!("{}/metrics", local.base)).send().await.expect("reaches").text().await.expect("text");
    let agent = r#"namespace="default",agent="deep-research""#;
    assert!(
        sample(&text, &format!(r#"yuxi_runs_ended_total{{{agent},status="completed"}}"#)).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    for histogram in ["yuxi_run_duration_seconds", "yuxi_run_queue_seconds", "yuxi_run_time_to_first_event_seconds"] {
        let count = sample(&text, &format!("{histogram}_count{{{agent}}}"));
        assert!(count.is_some_and(|n| n >= 1.0), "{histogram}: {text}");
        let all = sample(&text, &format!(r#"{histogram}_bucket{{{agent},le="+Inf"}}"#));
        assert_eq!(all, count, "{histogram}: the +Inf bucket holds every observation");
    }
    // Its children are counted under their own agents.
    for child in ["research-explorer", "fact-verifier"] {
        let ended = format!(r#"yuxi_runs_ended_total{{namespace="default",agent="{child}",status="completed"}}"#);
        assert!(sample(&text, &ended).is_some_and(|n| n >= 1.0), "{child}: {text}");
    }
    let model_latency = text
        .lines()
        .filter(|l| l.starts_with("yuxi_model_latency_seconds_count{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(model_latency >= 6.0, "every model call of the tree: {text}");
    assert!(text.contains("yuxi_model_time_to_first_token_seconds_count{"), "{text}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    local.stop();
}

crate::with_each_store!(a_deep_research_tree_is_counted_in_the_run_and_model_metrics);
