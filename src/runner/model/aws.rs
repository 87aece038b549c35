//! AWS credentials for Bedrock, and SigV4 signing with them, without the AWS SDK's runtime.
//!
//! Credentials come from the Model's Secret ([`Credentials::Aws`]) or, for
//! [`Credentials::AwsFromEnvironment`], from the runner's environment, in the order of the AWS SDKs'
//! default chain (leaving out the files a pod has not):
//! 1. `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`;
//! 2. web identity (IRSA): `AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE`, exchanged with STS
//!    `AssumeRoleWithWebIdentity` (an unsigned request; the token file is read at each exchange, since
//!    the kubelet rotates it), at `https://sts.<region>.amazonaws.com` or `AWS_ENDPOINT_URL_STS`
//!    (also read as `AWS_STS_ENDPOINT`), session name `AWS_ROLE_SESSION_NAME` or `yuxi-runner`;
//! 3. EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` with the token of
//!    `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (or `AWS_CONTAINER_AUTHORIZATION_TOKEN`).
//!
//! Temporary credentials are kept until [`REFRESH_BEFORE`] their expiry.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::connection::Credentials;
use super::errors::answer_error;
use super::http::{redact, redact_error};
use super::turn::ModelError;

/// Temporary credentials are exchanged again this long before they expire.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// One set of AWS keys.
#[derive(Clone)]
pub struct AwsKeys {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
}

/// The variables of the environment that say where credentials come from, read once.
#[derive(Clone, Debug, Default)]
pub struct AwsEnvironment {
    vars: Vec<(&'static str, String)>,
}

const VARS: [&str; 10] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_SESSION_NAME",
    "AWS_ENDPOINT_URL_STS",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
];

impl AwsEnvironment {
    /// The variables as `lookup` gives them (`std::env::var` in the runner), empty ones left out;
    /// `AWS_STS_ENDPOINT` stands for `AWS_ENDPOINT_URL_STS` when that is unset.
    pub fn read(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut vars: Vec<(&'static str, String)> =
            VARS.iter().filter_map(|name| lookup(name).filter(|v| !v.is_empty()).map(|v| (*name, v))).collect();
        if !vars.iter().any(|(name, _)| *name == "AWS_ENDPOINT_URL_STS")
            && let Some(endpoint) = lookup("AWS_STS_ENDPOINT").filter(|v| !v.is_empty())
        {
            vars.push(("AWS_ENDPOINT_URL_STS", endpoint));
        }
        Self { vars }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

/// Where a Bedrock Model's keys come from, and the temporary ones obtained so far.
pub struct AwsCredentials {
    fixed: Option<AwsKeys>,
    environment: AwsEnvironment,
    region: String,
    http: reqwest::Client,
    cached: tokio::sync::Mutex<Option<(AwsKeys, SystemTime)>>,
}

impl AwsCredentials {
    /// The credentials of `credentials` for `region`; the environment's (`environment`) for
    /// [`Credentials::AwsFromEnvironment`] and for anything else but a key pair.
    pub fn new(credentials: &Credentials, environment: AwsEnvironment, region: &str, http: reqwest::Client) -> Self {
        let fixed = match credentials {
            Credentials::Aws { access_key_id, secret_access_key, session_token } => Some(AwsKeys {
                access_key_id: access_key_id.clone(),
                secret_access_key: secret_access_key.clone(),
                session_token: session_token.clone(),
            }),
            _ => None,
        };
        Self { fixed, environment, region: region.to_string(), http, cached: tokio::sync::Mutex::new(None) }
    }

    /// The keys to sign with now. Errors: no source of credentials (fatal), STS or the Pod Identity
    /// agent refusing (fatal) or failing (transient); messages never hold a token or a key.
    pub async fn keys(&self) -> Result<AwsKeys, ModelError> {
        if let Some(keys) = &self.fixed {
            return Ok(keys.clone());
        }
        let env = &self.environment;
        if let (Some(id), Some(secret)) = (env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")) {
            let session_token = env.get("AWS_SESSION_TOKEN").map(str::to_string);
            return Ok(AwsKeys { access_key_id: id.into(), secret_access_key: secret.into(), session_token });
        }
        let mut cached = self.cached.lock().await;
        if let Some((keys, expires)) = cached.as_ref()
            && SystemTime::now() + REFRESH_BEFORE < *expires
        {
            return Ok(keys.clone());
        }
        let fresh = if let (Some(role), Some(file)) = (env.get("AWS_ROLE_ARN"), env.get("AWS_WEB_IDENTITY_TOKEN_FILE"))
        {
            self.assume_role(role, file).await?
        } else if let Some(uri) = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
            self.pod_identity(uri).await?
        } else {
            return Err(ModelError::fatal(
                "no AWS credentials: the Model names no access key Secret, and the runner has neither \
                 AWS_ACCESS_KEY_ID, a web identity (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE) nor EKS Pod \
                 Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI)",
            ));
        };
        *cached = Some(fresh.clone());
        Ok(fresh.0)
    }

    async fn assume_role(&self, role: &str, token_file: &str) -> Result<(AwsKeys, SystemTime), ModelError> {
        let token = tokio::fs::read_to_string(token_file)
            .await
            .map_err(|e| ModelError::fatal(format!("cannot read the web identity token file {token_file}: {e}")))?;
        let endpoint = match self.environment.get("AWS_ENDPOINT_URL_STS") {
            Some(endpoint) => endpoint.trim_end_matches('/').to_string(),
            None => {
                let domain = if self.region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
                format!("https://sts.{}.{domain}", self.region)
            }
        };
        let session = self.environment.get("AWS_ROLE_SESSION_NAME").unwrap_or("yuxi-runner");
        let form = [
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", role),
            ("RoleSessionName", session),
            ("WebIdentityToken", token.trim()),
        ];
        let body = serde_urlencoded::to_string(form).map_err(|e| ModelError::fatal(e.to_string()))?;
        let secrets = [token.trim().to_string()];
        let what = format!("cannot assume the role {role} with the pod's web identity");
        let sent = self
            .http
            .post(format!("{endpoint}/"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await;
        let response =
            sent.map_err(|e| ModelError::transient(redact(&format!("{what}: STS is unreachable: {e}"), &secrets)))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(|e| ModelError::transient(format!("{what}: {e}")))?;
        if !(200..300).contains(&status) {
            let code = xml_tag(&text, "Code").unwrap_or_default();
            let message = xml_tag(&text, "Message").unwrap_or_default();
            let body = serde_json::json!({"error": {"type": code, "message": message}}).to_string();
            return Err(redact_error(
                match answer_error(status, &headers, &body) {
                    ModelError::Transient { message, retry_after } => {
                        ModelError::Transient { message: format!("{what}: {message}"), retry_after }
                    }
                    ModelError::Fatal(message) => ModelError::fatal(format!("{what}: {message}")),
                },
                &secrets,
            ));
        }
        let field = |name: &str| {
            xml_tag(&text, name).ok_or_else(|| ModelError::fatal(format!("{what}: STS answered without {name}")))
        };
        let keys = AwsKeys {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: Some(field("SessionToken")?),
        };
        Ok((keys, expiry(&field("Expiration")?)))
    }

    async fn pod_identity(&self, uri: &str) -> Result<(AwsKeys, SystemTime), ModelError> {
        let token = match self.environment.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
            Some(file) => tokio::fs::read_to_string(file)
                .await
                .map_err(|e| ModelError::fatal(format!("cannot read the Pod Identity token file {file}: {e}")))?,
            None => self.environment.get("AWS_CONTAINER_AUTHORIZATION_TOKEN").unwrap_or_default().to_string(),
        };
        let what = "cannot get the pod's EKS Pod Identity credentials";
        let mut request = self.http.get(uri);
        if !token.trim().is_empty() {
            request = request.header("authorization", token.trim());
        }
        let response = request.send().await.map_err(|e| ModelError::transient(format!("{what}: {e}")))?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|e| ModelError::transient(format!("{what}: {e}")))?;
        let field = |name: &str| body[name].as_str().map(str::to_string);
        match (status.is_success(), field("AccessKeyId"), field("SecretAccessKey")) {
            (true, Some(access_key_id), Some(secret_access_key)) => {
                let expires =
                    field("Expiration").map(|e| expiry(&e)).unwrap_or_else(|| SystemTime::now() + REFRESH_BEFORE * 2);
                Ok((AwsKeys { access_key_id, secret_access_key, session_token: field("Token") }, expires))
            }
            _ if status.is_server_error() => Err(ModelError::transient(format!("{what}: the agent answered {status}"))),
            _ => Err(ModelError::fatal(format!("{what}: the agent answered {status}"))),
        }
    }
}

/// An ISO 8601 expiry; unreadable, one refresh period from now (used once, then exchanged again).
fn expiry(text: &str) -> SystemTime {
    text.trim()
        .parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .unwrap_or_else(|_| SystemTime::now() + REFRESH_BEFORE * 2)
}

/// The text of the first `<name>` element of `xml`, its five predefined entities unescaped. STS's
/// answers are flat and small; a parser would add nothing.
pub fn xml_tag(xml: &str, name: &str) -> Option<String> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    let text = &xml[start..end];
    Some(
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// The SigV4 headers (`authorization`, `x-amz-date`, and `x-amz-security-token` for temporary keys)
/// of a request to `service` in `region`, signing its method, URL (already percent-encoded), `headers`
/// and `body` at `time`. Errors (fatal): a URL or header the signer cannot read.
#[allow(clippy::too_many_arguments)]
pub fn sign(
    keys: &AwsKeys,
    region: &str,
    service: &str,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    time: SystemTime,
) -> Result<HeaderMap, ModelError> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    use aws_sigv4::sign::v4;
    let failed = |e: &dyn std::fmt::Display| ModelError::fatal(format!("cannot sign the request: {e}"));
    let credentials = aws_credential_types::Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.clone(),
        keys.session_token.clone(),
        None,
        "yuxi",
    );
    let identity = credentials.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let request = SignableRequest::new(method, url, headers.iter().copied(), SignableBody::Bytes(body))
        .map_err(|e| failed(&e))?;
    let (instructions, _signature) = sign(request, &params).map_err(|e| failed(&e))?.into_parts();
    let mut signed = HeaderMap::new();
    for (name, value) in instructions.headers() {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| failed(&e))?;
        let mut value = HeaderValue::from_str(value).map_err(|e| failed(&e))?;
        value.set_sensitive(true);
        signed.insert(name, value);
    }
    Ok(signed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sts_answers_are_read_tag_by_tag() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>\
            <SessionToken>tok&amp;en</SessionToken><SecretAccessKey>secret</SecretAccessKey>\
            <Expiration>2026-12-05T10:00:00Z</Expiration><AccessKeyId>ASIAEXAMPLE</AccessKeyId>\
            </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        assert_eq!(xml_tag(xml, "SessionToken").as_deref(), Some("tok&en"));
        assert_eq!(xml_tag(xml, "AccessKeyId").as_deref(), Some("ASIAEXAMPLE"));
        assert_eq!(xml_tag(xml, "Missing"), None);
        let expires = expiry("2026-12-05T10:00:00Z");
        assert_eq!(expires, SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_464_800));
    }

    #[tokio::test]
    async fn the_environments_keys_come_first_and_without_a_source_the_error_names_them_all() {
        crate::tls::install_crypto_provider();
        let vars = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("AKIAENVIRONMENT".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("environment-secret".to_string()),
            "AWS_ROLE_ARN" => Some("arn:aws:iam::123456789012:role/bedrock".to_string()),
            _ => None,
        };
        let environment = AwsCredentials::new(
            &Credentials::AwsFromEnvironment,
            AwsEnvironment::read(vars),
            "us-east-1",
            reqwest::Client::new(),
        );
        let keys = environment.keys().await.expect("keys");
        assert_eq!((keys.access_key_id.as_str(), keys.session_token), ("AKIAENVIRONMENT", None));
        let nothing = AwsCredentials::new(
            &Credentials::AwsFromEnvironment,
            AwsEnvironment::default(),
            "us-east-1",
            reqwest::Client::new(),
        );
        let error = nothing.keys().await.err().expect("no source");
        assert!(!error.is_transient(), "{error}");
        for name in ["AWS_ACCESS_KEY_ID", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI"] {
            assert!(error.to_string().contains(name), "{error}");
        }
    }

    #[test]
    fn the_signature_names_its_scope_and_signed_headers() {
        let keys = AwsKeys {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("session".into()),
        };
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_464_800);
        let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/a.b-v1%3A0/converse-stream";
        let headers =
            sign(&keys, "us-east-1", "bedrock", "POST", url, &[("content-type", "application/json")], b"{}", time)
                .expect("signed");
        let authorization = headers["authorization"].to_str().expect("ascii");
        assert!(authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="), "{authorization}");
        assert_eq!(headers["x-amz-date"], "20261205T100000Z");
        assert_eq!(headers["x-amz-security-token"], "session");
    }
}
