//! The chart's RBAC on a real API server, against the calls each service account's code makes
//! (`charts/yuxi-operator/rbac-calls.yaml`), both ways: every call there is allowed
//! (SubjectAccessReview), and the account may do nothing else, in the release namespace, each served
//! namespace and an unrelated one (SelfSubjectRulesReview as the account itself); no account reads
//! Secrets cluster-wide.

use std::collections::BTreeSet;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectRulesReview, SelfSubjectRulesReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

use crate::chart_pods::service_account_token;
use crate::install::{RELEASE, RELEASE_NAMESPACE, SERVED, installed, root};

/// One permission: (verb, group, resource with its subresource, name or "" for any).
type Permission = (String, String, String, String);

/// The namespace no rule of the chart covers.
const UNRELATED: &str = "default";

/// The calls file's rules of `account` that hold in `namespace` (`None`: cluster-scoped).
fn expected(account: &str, namespace: Option<&str>) -> BTreeSet<Permission> {
    let text = std::fs::read_to_string(root().join("charts/yuxi-operator/rbac-calls.yaml")).expect("rbac-calls.yaml");
    let calls: Value = serde_norway::from_str(&text).expect("YAML");
    let places = &calls[account];
    assert!(places.is_object(), "rbac-calls.yaml lists {account}");
    let mut found = BTreeSet::new();
    for (place, rules) in places.as_object().expect("places") {
        let holds = match (place.as_str(), namespace) {
            ("served", Some(ns)) => SERVED.contains(&ns),
            ("facade", Some(ns)) => ns == SERVED[0],
            ("release", Some(ns)) => ns == RELEASE_NAMESPACE,
            ("any", Some(_)) => true,
            ("cluster", _) => true,
            (_, None) => false,
            (other, _) => panic!("rbac-calls.yaml: unknown place {other}"),
        };
        if !holds {
            continue;
        }
        for rule in rules.as_array().expect("rules") {
            let names: Vec<String> = match rule.get("names") {
                Some(Value::Array(names)) => {
                    names.iter().map(|n| n.as_str().expect("name").replace("{release}", RELEASE)).collect()
                }
                _ => vec![String::new()],
            };
            for verb in rule["verbs"].as_array().expect("verbs") {
                for name in &names {
                    found.insert((
                        verb.as_str().expect("verb").to_string(),
                        rule["group"].as_str().expect("group").to_string(),
                        rule["resource"].as_str().expect("resource").to_string(),
                        name.clone(),
                    ));
                }
            }
        }
    }
    found
}

/// Rules every authenticated account has, which the chart does not grant: reviewing its own access
/// (`system:basic-user`), and reading cluster trust bundles (`system:cluster-trust-bundle-discovery`).
fn built_in(permission: &Permission) -> bool {
    let (verb, group, resource, _) = permission;
    (group == "authorization.k8s.io" && resource.starts_with("selfsubject"))
        || (group == "authentication.k8s.io" && resource == "selfsubjectreviews")
        || (group == "certificates.k8s.io"
            && resource == "clustertrustbundles"
            && ["get", "list", "watch"].contains(&verb.as_str()))
}

/// What `namespace` lets the account of `client` do, by its own SelfSubjectRulesReview.
async fn granted(client: &kube::Client, namespace: &str) -> BTreeSet<Permission> {
    let reviews: Api<SelfSubjectRulesReview> = Api::all(client.clone());
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec { namespace: Some(namespace.to_string()) },
        ..Default::default()
    };
    let status = reviews.create(&PostParams::default(), &review).await.expect("rules review").status.expect("status");
    assert!(!status.incomplete, "the rules review is complete: {:?}", status.evaluation_error);
    let mut found = BTreeSet::new();
    for rule in status.resource_rules {
        let names = rule.resource_names.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| vec![String::new()]);
        for verb in &rule.verbs {
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    for name in &names {
                        found.insert((verb.clone(), group.clone(), resource.clone(), name.clone()));
                    }
                }
            }
        }
    }
    found.retain(|p| !built_in(p));
    found
}

/// Whether `user` may make the call `permission` in `namespace` (`None`: cluster-scoped), by a
/// SubjectAccessReview.
async fn allowed(admin: &kube::Client, user: &str, permission: &Permission, namespace: Option<&str>) -> bool {
    let (verb, group, resource, name) = permission;
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r.to_string(), Some(s.to_string())),
        None => (resource.clone(), None),
    };
    let account_namespace = user.split(':').nth(2).unwrap_or_default();
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{account_namespace}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: namespace.map(str::to_string),
                verb: Some(verb.clone()),
                group: Some(group.clone()),
                resource: Some(resource),
                subresource,
                name: (!name.is_empty()).then(|| name.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    reviews.create(&PostParams::default(), &review).await.expect("access review").status.expect("status").allowed
}

fn cluster_scoped(permission: &Permission) -> bool {
    permission.1 == "authentication.k8s.io" && permission.2 == "tokenreviews"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_account_may_make_exactly_the_calls_its_code_makes() {
    let plane = installed().plane;
    let admin = plane.admin().await;
    let mut problems = Vec::new();
    for account in ["controller", "api", "webhook"] {
        let service_account = format!("{RELEASE}-{account}");
        let user = format!("system:serviceaccount:{RELEASE_NAMESPACE}:{service_account}");
        let token = service_account_token(&admin, RELEASE_NAMESPACE, &service_account, &[]).await;
        let client = plane.client(&token).await;
        for namespace in [RELEASE_NAMESPACE, SERVED[0], SERVED[1], UNRELATED] {
            let wanted = expected(account, Some(namespace));
            for permission in &wanted {
                let scope = if cluster_scoped(permission) { None } else { Some(namespace) };
                if !allowed(&admin, &user, permission, scope).await {
                    problems
                        .push(format!("{account} in {namespace}: the code calls {permission:?}, which is not allowed"));
                }
            }
            let has = granted(&client, namespace).await;
            for extra in has.difference(&wanted) {
                problems.push(format!("{account} in {namespace}: granted {extra:?}, which no call needs"));
            }
            for missing in wanted.difference(&has) {
                problems.push(format!("{account} in {namespace}: not granted {missing:?}"));
            }
        }
        for verb in ["get", "list", "watch"] {
            let permission = (verb.to_string(), String::new(), "secrets".to_string(), String::new());
            if allowed(&admin, &user, &permission, None).await {
                problems.push(format!("{account} may {verb} Secrets cluster-wide"));
            }
        }
    }
    assert!(problems.is_empty(), "the chart's RBAC and rbac-calls.yaml differ:\n{}", problems.join("\n"));
}
