//! Whether a run's pod gets its credentials: only a Secret that its starter announced on the run
//! ([`CREDENTIALS_ANNOTATION`]), of the credentials type, labelled with the run and owned by it. Anything
//! else of that name (a service-account token Secret, a Secret left by someone else) is never mounted.

use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::resources::AgentRun;
use crate::resources::names::{CREDENTIALS_ANNOTATION, CREDENTIALS_SECRET_TYPE, RUN_LABEL, label_value};
use crate::run::inputs::env as env_names;

/// What to do with a run's credentials when its pod is created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialsVerdict {
    /// The run announces none: its pod gets no token.
    None,
    /// The announced Secret is not there yet (its starter creates it right after the run): look again
    /// shortly, and create the pod then.
    Wait,
    /// The Secret is the run's own: mount it.
    Mount,
    /// A Secret of that name exists but is not the run's own: the pod gets no token, and this says why.
    Refuse(String),
}

/// Whether `run`'s pod mounts `secret` (the Secret named by [`CREDENTIALS_ANNOTATION`], `None` when it does
/// not exist). Pure.
pub fn credentials_verdict(run: &AgentRun, secret: Option<&Secret>) -> CredentialsVerdict {
    let Some(announced) = run.metadata.annotations.as_ref().and_then(|a| a.get(CREDENTIALS_ANNOTATION)) else {
        return CredentialsVerdict::None;
    };
    let Some(secret) = secret else { return CredentialsVerdict::Wait };
    let name = run.metadata.name.as_deref().unwrap_or_default();
    let refuse = |why: &str| {
        CredentialsVerdict::Refuse(format!("the Secret {announced:?} is not this run's credentials: {why}"))
    };
    if secret.metadata.name.as_deref() != Some(announced.as_str()) {
        return refuse("it is another Secret");
    }
    if secret.type_.as_deref() != Some(CREDENTIALS_SECRET_TYPE) {
        return refuse(&format!(
            "its type is {:?}, not {CREDENTIALS_SECRET_TYPE:?}",
            secret.type_.as_deref().unwrap_or("")
        ));
    }
    let labelled = secret.metadata.labels.as_ref().and_then(|l| l.get(RUN_LABEL)) == Some(&label_value(name));
    if !labelled {
        return refuse(&format!("it is not labelled {RUN_LABEL}={}", label_value(name)));
    }
    let owned = run.metadata.uid.as_ref().is_some_and(|uid| {
        secret.metadata.owner_references.iter().flatten().any(|r| &r.uid == uid && r.kind == "AgentRun")
    });
    if !owned {
        return refuse("it is not owned by this AgentRun");
    }
    CredentialsVerdict::Mount
}

/// Takes the run token out of `pod` (its runner container's `YUXI_RUN_TOKEN`), for a run whose
/// credentials are refused.
pub fn without_credentials(mut pod: Pod) -> Pod {
    for container in pod.spec.iter_mut().flat_map(|spec| spec.containers.iter_mut()) {
        if let Some(vars) = container.env.as_mut() {
            vars.retain(|var| var.name != env_names::RUN_TOKEN);
        }
    }
    pod
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::resources::names::credentials_secret_name;

    fn run(announced: bool) -> AgentRun {
        let mut run = AgentRun::new("parent-1", Default::default());
        run.metadata.uid = Some("uid-1".into());
        if announced {
            run.metadata.annotations =
                Some(BTreeMap::from([(CREDENTIALS_ANNOTATION.to_string(), credentials_secret_name(&run))]));
        }
        run
    }

    /// The Secret the facade makes for `run`.
    fn own_secret(run: &AgentRun) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.name = Some(credentials_secret_name(run));
        secret.metadata.labels = Some(BTreeMap::from([(RUN_LABEL.to_string(), "parent-1".to_string())]));
        secret.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "yuxi.dev/v1alpha1".into(),
            kind: "AgentRun".into(),
            name: "parent-1".into(),
            uid: "uid-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        secret.type_ = Some(CREDENTIALS_SECRET_TYPE.into());
        secret
    }

    #[test]
    fn only_the_runs_own_announced_secret_is_mounted() {
        let announced = run(true);
        assert_eq!(credentials_verdict(&run(false), Some(&own_secret(&announced))), CredentialsVerdict::None);
        assert_eq!(credentials_verdict(&announced, None), CredentialsVerdict::Wait);
        assert_eq!(credentials_verdict(&announced, Some(&own_secret(&announced))), CredentialsVerdict::Mount);
        let mut token = own_secret(&announced);
        token.type_ = Some("kubernetes.io/service-account-token".into());
        let mut unlabelled = own_secret(&announced);
        unlabelled.metadata.labels = None;
        let mut stranger = own_secret(&announced);
        stranger.metadata.owner_references.as_mut().expect("refs")[0].uid = "uid-2".into();
        let mut unowned = own_secret(&announced);
        unowned.metadata.owner_references = None;
        for (what, secret, why) in [
            ("a service-account token", token, "its type is \"kubernetes.io/service-account-token\""),
            ("no run label", unlabelled, "it is not labelled yuxi.dev/run=parent-1"),
            ("another run's", stranger, "it is not owned by this AgentRun"),
            ("nobody's", unowned, "it is not owned by this AgentRun"),
        ] {
            match credentials_verdict(&announced, Some(&secret)) {
                CredentialsVerdict::Refuse(message) => assert!(message.contains(why), "{what}: {message}"),
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_refused_secret_leaves_the_pod_without_a_token() {
        use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};
        let var = |name: &str| EnvVar { name: name.into(), ..EnvVar::default() };
        let pod = Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "runner".into(),
                    env: Some(vec![var(env_names::REDIS_URL), var(env_names::RUN_TOKEN)]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let stripped = without_credentials(pod);
        let names: Vec<_> =
            stripped.spec.expect("spec").containers[0].env.iter().flatten().map(|v| v.name.clone()).collect();
        assert_eq!(names, [env_names::REDIS_URL]);
    }
}
