// The login: through the OIDC issuer the facade trusts, when it offers one ("Sign in with …", the
// authorization code flow the facade runs; the browser comes back to #/oidc with a one-time code), a
// username and password for the local mode's `POST /api/auth/token`, or a token pasted as it is
// (checked with `GET /api/auth/me` before it is kept).
import { useEffect, useState } from 'preact/hooks';
import { api, finishOidcLogin, login, oidcConfig, startOidcLogin } from '../api';
import { t } from '../i18n';

export function LoginPage({ onToken }: { onToken: (token: string) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [provider, setProvider] = useState<string | null>(null);

  useEffect(() => {
    const back = location.hash.match(/^#\/oidc\?(.*)$/);
    if (back) {
      setBusy(true);
      finishOidcLogin(back[1])
        .then((next) => {
          location.replace(`${location.pathname}#/agents`);
          onToken(next);
        })
        .catch((err) => {
          location.replace(`${location.pathname}#/`);
          setError(t('login.failed', { message: (err as Error).message }));
        })
        .finally(() => setBusy(false));
    }
    oidcConfig()
      .then((config) => setProvider(config.enabled ? config.provider_name ?? 'OIDC' : null))
      .catch(() => setProvider(null));
  }, []);

  const withProvider = async () => {
    setBusy(true);
    setError(null);
    try {
      await startOidcLogin();
    } catch (err) {
      setError(t('login.failed', { message: (err as Error).message }));
      setBusy(false);
    }
  };

  const withPassword = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onToken(await login(username, password));
    } catch (err) {
      setError(t('login.failed', { message: (err as Error).message }));
    } finally {
      setBusy(false);
    }
  };
  const withToken = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const pasted = token.trim();
      await api('GET', '/api/auth/me', undefined, pasted);
      onToken(pasted);
    } catch (err) {
      setError(t('login.failed', { message: (err as Error).message }));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="login" aria-labelledby="login-heading">
      <h1 id="login-heading">{t('login.heading')}</h1>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {busy && location.hash.startsWith('#/oidc') && <p role="status">{t('login.finishing')}</p>}
      {provider && (
        <section class="login-provider" aria-labelledby="login-provider">
          <h2 id="login-provider">{t('login.providerHeading')}</h2>
          <button type="button" onClick={withProvider} disabled={busy}>
            {t('login.provider', { provider })}
          </button>
        </section>
      )}
      <div class="login-forms">
        <form onSubmit={withPassword} aria-labelledby="login-password">
          <h2 id="login-password">{t('login.password')}</h2>
          <label for="login-username">{t('login.username')}</label>
          <input
            id="login-username"
            name="username"
            autocomplete="username"
            required
            value={username}
            onInput={(e) => setUsername(e.currentTarget.value)}
          />
          <label for="login-pass">{t('login.passwordField')}</label>
          <input
            id="login-pass"
            name="password"
            type="password"
            autocomplete="current-password"
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
          <button type="submit" disabled={busy}>
            {t('login.submit')}
          </button>
        </form>
        <form onSubmit={withToken} aria-labelledby="login-token">
          <h2 id="login-token">{t('login.token')}</h2>
          <label for="login-token-field">{t('login.tokenField')}</label>
          <input
            id="login-token-field"
            name="token"
            type="password"
            autocomplete="off"
            required
            aria-describedby="login-token-hint"
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
          />
          <p id="login-token-hint" class="hint">
            {t('login.tokenHint')}
          </p>
          <button type="submit" disabled={busy}>
            {t('login.useToken')}
          </button>
        </form>
      </div>
    </section>
  );
}
