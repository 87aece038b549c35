//! `yuxi-operator validate`: manifests checked without a cluster, as a GitOps pipeline would run it.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

fn validate(paths: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_yuxi-operator")).arg("validate").args(paths).output().expect("runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn write(dir: &TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write");
    path
}

const AGENT: &str =
    "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: chat}\nspec: {backend: ChatbotAgent}\n";

#[test]
fn the_examples_pass_and_the_invalid_ones_fail() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = validate(&[&root.join("examples")]);
    assert!(output.status.success(), "{}", stdout(&output));
    assert_eq!(stdout(&output).lines().filter(|l| l.starts_with("ok ")).count(), 7, "{}", stdout(&output));
    assert!(stdout(&output).contains("(KnowledgeBase default/research-notes)"), "{}", stdout(&output));
    let output = validate(&[&root.join("examples/invalid")]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("spec.source.documents.folder"), "{}", stdout(&output));
}

#[test]
fn an_unknown_field_is_named() {
    let dir = TempDir::new().expect("dir");
    let file = write(
        &dir,
        "a.yaml",
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: chat}\nspec:\n  backend: ChatbotAgent\n  contxt: {tools: [a]}\n",
    );
    let output = validate(&[&file]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("error:   spec.contxt: unknown field of Agent"), "{}", stdout(&output));
}

#[test]
fn a_number_json_cannot_hold_is_named() {
    let dir = TempDir::new().expect("dir");
    let file = write(
        &dir,
        "a.yaml",
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: chat}\nspec:\n  backend: ChatbotAgent\n  context: {maxExecutionSteps: .inf}\n",
    );
    let output = validate(&[&file]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("spec.context.maxExecutionSteps: .inf is not a finite number"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_byte_order_mark_is_accepted() {
    let dir = TempDir::new().expect("dir");
    let file = write(&dir, "a.yaml", &format!("\u{feff}{AGENT}"));
    let output = validate(&[&file]);
    assert!(output.status.success(), "{}", stdout(&output));
}

#[test]
fn each_document_of_a_file_is_checked_and_other_kinds_are_skipped() {
    let dir = TempDir::new().expect("dir");
    let text = format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: broken}}\nspec: {{backend: 5}}\n---\n{AGENT}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: c}}\n"
    );
    let file = write(&dir, "all.yaml", &text);
    let output = validate(&[&file]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("all.yaml#1 (not decoded)") && out.contains("error:   spec.backend:"), "{out}");
    assert!(out.contains("ok       ") && out.contains("all.yaml#2 (Agent default/chat)"), "{out}");
    assert!(out.contains("skipped  ") && out.contains("all.yaml#3 (Secret (v1))"), "{out}");
}

#[test]
fn runs_named_by_generate_name_are_separate_runs() {
    let dir = TempDir::new().expect("dir");
    let run = |input: &str| {
        format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata: {{generateName: run-}}\nspec: {{agent: chat, input: {input}}}\n"
        )
    };
    let a = write(&dir, "a.yaml", &run("one"));
    let b = write(&dir, "b.yaml", &run("two"));
    let output = validate(&[&a, &b]);
    assert!(output.status.success(), "{}", stdout(&output));
}

#[test]
fn object_names_and_namespaces_are_checked() {
    let dir = TempDir::new().expect("dir");
    let file = write(
        &dir,
        "a.yaml",
        "apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata: {name: Bad Name!}\nspec: {agent: chat, input: x}\n",
    );
    let output = validate(&[&file]);
    assert!(
        stdout(&output).contains("error:   metadata.name: \"Bad Name!\" is not an object name"),
        "{}",
        stdout(&output)
    );
    let file = write(
        &dir,
        "b.yaml",
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: chat, namespace: Bad NS}\nspec: {backend: ChatbotAgent}\n",
    );
    let output = validate(&[&file]);
    assert!(
        stdout(&output).contains("error:   metadata.namespace: \"Bad NS\" is not a namespace name"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn nothing_to_check_is_a_failure() {
    let dir = TempDir::new().expect("dir");
    let output = validate(&[dir.path()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no Agent, AgentRun, KnowledgeBase or Model manifests found")
    );
    let file = write(&dir, "empty.yaml", "# nothing here\n");
    assert_eq!(validate(&[&file]).status.code(), Some(1));
}

#[test]
fn a_closed_output_pipe_is_not_a_crash() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"))
        .arg("validate")
        .arg(root.join("examples"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("waits");
    assert_ne!(output.status.code(), Some(101), "panicked: {}", String::from_utf8_lossy(&output.stderr));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("panicked"));
}

#[test]
fn a_config_map_of_documents_is_checked_as_the_api_server_would() {
    let dir = TempDir::new().expect("dir");
    let good = write(
        &dir,
        "faq.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: team-faq}\ndata:\n  faq.md: \"# FAQ\"\n",
    );
    let output = validate(&[&good]);
    assert!(output.status.success(), "{}", stdout(&output));
    assert!(stdout(&output).contains("(ConfigMap default/team-faq)"), "{}", stdout(&output));
    let bad = write(
        &dir,
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: team-faq}\ndata:\n  notes/faq.md: \"# FAQ\"\n",
    );
    let output = validate(&[&bad]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("data.notes/faq.md: a key is 1 to 253"), "{}", stdout(&output));
}

const MODEL: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Model\nmetadata: {name: deepseek}\nspec: {provider: OpenAICompatible, preset: deepseek, model: deepseek-chat}\n";

/// Models are checked by their rules (and a misspelt field named), and the local mode's loading accepts
/// them beside Agents and serves only the Agents: agents do not name Models yet.
#[test]
fn models_are_checked_and_the_local_mode_ignores_them() {
    let dir = TempDir::new().expect("dir");
    let agent = write(&dir, "agent.yaml", AGENT);
    let model = write(&dir, "model.yaml", MODEL);
    let output = validate(&[&agent, &model]);
    assert!(output.status.success(), "{}", stdout(&output));
    assert!(stdout(&output).contains("(Model default/deepseek)"), "{}", stdout(&output));
    let loaded =
        yuxi_operator::resources::manifest_set::load(&[agent, model.clone()], &Default::default()).expect("loads");
    assert_eq!(loaded.agents.len(), 1);

    let bad = write(&dir, "bad.yaml", &MODEL.replace("preset: deepseek", "preset: vllm"));
    let output = validate(&[&bad]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("error:   spec.baseURL: provider OpenAICompatible needs baseURL"),
        "{}",
        stdout(&output)
    );
    let typo = write(&dir, "typo.yaml", &MODEL.replace("preset:", "presett:"));
    let output = validate(&[&typo]);
    assert!(stdout(&output).contains("spec.presett: unknown field of Model"), "{}", stdout(&output));
    assert!(
        yuxi_operator::resources::manifest_set::load(&[bad], &Default::default()).is_err(),
        "an invalid Model stops the local mode"
    );
}

#[test]
fn an_agents_names_are_checked_against_the_files_and_the_skills_library() {
    let dir = TempDir::new().expect("dir");
    let skills = TempDir::new().expect("skills");
    std::fs::create_dir(skills.path().join("citations")).expect("skill");
    std::fs::write(skills.path().join("citations/SKILL.md"), "---\ndescription: cite\n---\n").expect("SKILL.md");
    write(
        &dir,
        "agent.yaml",
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: chat}\nspec:\n  backend: ChatbotAgent\n  context: {knowledges: [handbook], skills: [citation], subagents: [helper]}\n",
    );
    let output = validate(&[dir.path()]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let said = stdout(&output);
    assert!(said.contains("spec.context.knowledges[0]: no knowledge base \"handbook\"; there are none"), "{said}");
    assert!(said.contains("spec.context.subagents[0]: no subagent \"helper\""), "{said}");
    assert!(!said.contains("spec.context.skills"), "skills go unchecked without a library: {said}");

    let output = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"))
        .args(["validate", "--references-elsewhere", "--skills-library"])
        .arg(skills.path())
        .arg(dir.path())
        .output()
        .expect("runs");
    let said = stdout(&output);
    assert!(output.status.success(), "references elsewhere are warnings: {said}");
    assert!(
        said.contains("warning: spec.context.skills[0]: no skill \"citation\"; did you mean \"citations\"?"),
        "{said}"
    );
    assert!(said.contains("warning: spec.context.knowledges[0]"), "{said}");
}
