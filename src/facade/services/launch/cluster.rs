//! A cluster's runs: AgentRun resources, which the controller turns into sandbox pods
//! ([`ClusterLauncher`]).

use kube::core::ObjectMeta;

use super::error::LaunchError;
use super::run::agent_run;
use crate::facade::services::writers::Writers;
use crate::resources::AgentRun;
use crate::run::RunRecord;

/// Creates AgentRun resources in one namespace; the controller turns each into a sandbox pod.
#[derive(Clone)]
pub struct ClusterLauncher {
    namespace: String,
    client: kube::Client,
    writers: Writers,
}

impl ClusterLauncher {
    /// A launcher for `namespace`, writing with the facade's `client`.
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Self::with_writers(Writers::own(client), namespace)
    }

    /// A launcher for `namespace` whose AgentRuns are written with `writers`: as the user who started
    /// the run's tree ([`RunRecord::principal`]) when the facade writes as its callers. The credentials
    /// Secret is the facade's own write (a user needs no right to Secrets).
    pub fn with_writers(writers: Writers, namespace: &str) -> Self {
        Self { namespace: namespace.into(), client: writers.own_client().clone(), writers }
    }

    /// The AgentRuns of the namespace, as `record`'s user when the facade writes as its callers.
    fn runs(&self, record: &RunRecord) -> Result<kube::Api<AgentRun>, LaunchError> {
        let client = self
            .writers
            .for_caller(record.principal.as_ref())
            .map_err(|e| LaunchError::WriteAs { run_id: record.run_id.clone(), reason: e.to_string() })?;
        Ok(kube::Api::namespaced(client, &self.namespace))
    }

    /// Creates the run's AgentRun and, for a parent run, the Secret with its credentials (key `token`,
    /// owned by the AgentRun, so it goes with it), which the controller mounts into the runner container
    /// only. An object of that name existing already (a retry) counts as created.
    ///
    /// Errors: the Kubernetes API's refusal or failure, as [`LaunchError::CreateAgentRun`],
    /// [`LaunchError::ReadAgentRun`] or [`LaunchError::CreateSecret`], naming the run.
    pub async fn create(
        &self,
        record: &RunRecord,
        input: String,
        credentials: Option<&str>,
    ) -> Result<(), LaunchError> {
        use crate::resources::names;
        let run_id = || record.run_id.clone();
        let params =
            kube::api::PostParams { dry_run: false, field_manager: Some(names::FACADE_FIELD_MANAGER.to_string()) };
        let mut wanted = agent_run(record, input);
        if credentials.is_some() {
            // The controller waits for this Secret, checks that it is the run's own, and mounts nothing else.
            let name = names::credentials_secret_name(&wanted);
            wanted.metadata.annotations.get_or_insert_default().insert(names::CREDENTIALS_ANNOTATION.into(), name);
        }
        let runs = self.runs(record)?;
        let run = match runs.create(&params, &wanted).await {
            Ok(run) => run,
            Err(kube::Error::Api(status)) if status.code == 409 => {
                kube::Api::<AgentRun>::namespaced(self.client.clone(), &self.namespace)
                    .get(&record.run_id)
                    .await
                    .map_err(|source| LaunchError::ReadAgentRun { run_id: run_id(), source })?
            }
            Err(source) => return Err(LaunchError::CreateAgentRun { run_id: run_id(), source }),
        };
        let Some(token) = credentials else { return Ok(()) };
        let namespace = kube::ResourceExt::namespace(&run).unwrap_or_default();
        let secret = k8s_openapi::api::core::v1::Secret {
            metadata: ObjectMeta {
                name: Some(names::credentials_secret_name(&run)),
                namespace: Some(namespace.clone()),
                owner_references: kube::Resource::controller_owner_ref(&run, &()).map(|r| vec![r]),
                labels: Some(std::collections::BTreeMap::from([(
                    names::RUN_LABEL.to_string(),
                    names::label_value(&record.run_id),
                )])),
                ..ObjectMeta::default()
            },
            string_data: Some(std::collections::BTreeMap::from([(
                names::CREDENTIALS_TOKEN_KEY.to_string(),
                token.to_string(),
            )])),
            type_: Some(names::CREDENTIALS_SECRET_TYPE.into()),
            ..Default::default()
        };
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.client.clone(), &namespace);
        match secrets.create(&params, &secret).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(LaunchError::CreateSecret { run_id: run_id(), source }),
        }
    }
}

impl ClusterLauncher {
    /// Resumes the waiting run `record`: its AgentRun annotated [`RESUMED_ANNOTATION`] (the controller
    /// then makes its pod anew) and its credentials Secret given the fresh `token`.
    ///
    /// Errors: the Kubernetes API's refusal or failure, as [`LaunchError::CreateAgentRun`] (the patch of
    /// the run) or [`LaunchError::CreateSecret`] (of its credentials).
    ///
    /// [`RESUMED_ANNOTATION`]: crate::resources::names::RESUMED_ANNOTATION
    pub async fn resume(&self, record: &RunRecord, token: &str) -> Result<(), LaunchError> {
        use crate::resources::names;
        let run_id = || record.run_id.clone();
        let params = kube::api::PatchParams {
            field_manager: Some(names::FACADE_FIELD_MANAGER.to_string()),
            ..Default::default()
        };
        let annotation = serde_json::json!({"metadata": {"annotations": {
            names::RESUMED_ANNOTATION: jiff::Timestamp::now().to_string()}}});
        let run = self
            .runs(record)?
            .patch(&record.run_id, &params, &kube::api::Patch::Merge(&annotation))
            .await
            .map_err(|source| LaunchError::CreateAgentRun { run_id: run_id(), source })?;
        let announced =
            run.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(names::CREDENTIALS_ANNOTATION));
        if !announced {
            return Ok(());
        }
        let namespace = kube::ResourceExt::namespace(&run).unwrap_or_default();
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.client.clone(), &namespace);
        let fresh = serde_json::json!({"stringData": {names::CREDENTIALS_TOKEN_KEY: token}});
        secrets
            .patch(&names::credentials_secret_name(&run), &params, &kube::api::Patch::Merge(&fresh))
            .await
            .map_err(|source| LaunchError::CreateSecret { run_id: run_id(), source })?;
        Ok(())
    }
}
