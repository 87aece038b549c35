//! The `--oidc-config` option of the facade's commands: an OIDC issuer's tokens accepted beside the
//! others.

use std::path::Path;

use yuxi_operator::facade::http::auth::Authenticator;
use yuxi_operator::facade::http::auth::oidc::{OidcConfig, OidcVerifier};

/// `otherwise`, with the tokens of the issuer `config` (a YAML file) accepted too when it is given.
/// Errors: the file cannot be read, is not such a configuration, or names no audience.
pub fn with_oidc(otherwise: Authenticator, config: Option<&Path>) -> anyhow::Result<Authenticator> {
    let Some(path) = config else { return Ok(otherwise) };
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--oidc-config {}: {e}", path.display()))?;
    let config: OidcConfig =
        serde_norway::from_str(&text).map_err(|e| anyhow::anyhow!("--oidc-config {}: {e}", path.display()))?;
    if config.audiences.is_empty() {
        anyhow::bail!("--oidc-config {}: audiences: name at least one", path.display());
    }
    if let Err(why) = yuxi_operator::facade::http::auth::oidc::check_config(&config) {
        anyhow::bail!("--oidc-config {}: {why}", path.display());
    }
    if let Some(login) = &config.login
        && !config.audiences.contains(&login.client_id)
    {
        anyhow::bail!(
            "--oidc-config {}: login.clientId: {:?} is not one of the audiences, so its ID tokens would be refused",
            path.display(),
            login.client_id
        );
    }
    let verifier = OidcVerifier::new(config).map_err(|e| anyhow::anyhow!("--oidc-config {}: {e}", path.display()))?;
    Ok(Authenticator::Oidc { verifier: std::sync::Arc::new(verifier), otherwise: Box::new(otherwise) })
}
