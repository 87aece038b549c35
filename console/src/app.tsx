// The console's frame: the login until a token is kept, then the header (sections, language, user) and
// the page the location's hash names: #/agents, #/agents/new, #/agents/edit/<slug>, #/chat, #/chat/<thread>,
// #/knowledge, #/knowledge/<slug>, #/runs (the list of runs), #/runs/<run_id> (a run, its tree's timeline).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, getToken, onUnauthorized, setToken } from './api';
import { lang, setLang, t, type Lang } from './i18n';
import { useSignal } from './state';
import { LoginPage } from './pages/login';
import { AgentsPage } from './pages/agents';
import { AgentForm } from './pages/agent-form';
import { ChatPage } from './pages/chat';
import { KnowledgePage } from './pages/knowledge';
import { TimelinePage } from './pages/timeline';
import { RunsPage } from './pages/runs';

/** Who the token names (`GET /api/auth/me`). */
export interface Me {
  uid: string;
  role: string;
  department_id: number | null;
}

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

/** Goes to a page of the console. */
export function navigate(path: string): void {
  location.hash = `#${path}`;
}

function LanguageSwitch() {
  const current = useSignal(lang);
  return (
    <div class="lang-switch" role="group" aria-label={t('app.language')}>
      {(['en', 'zh'] as Lang[]).map((code) => (
        <button
          type="button"
          class="link-button"
          lang={code === 'zh' ? 'zh-CN' : 'en'}
          aria-pressed={current === code}
          onClick={() => setLang(code)}
        >
          {code === 'en' ? 'English' : '中文'}
        </button>
      ))}
    </div>
  );
}

export function App() {
  useSignal(lang);
  const [token, setTokenState] = useState(getToken());
  const [me, setMe] = useState<Me | null>(null);
  const hash = useHash();
  const main = useRef<HTMLElement>(null);

  useEffect(() => {
    document.documentElement.lang = lang.value === 'zh' ? 'zh-CN' : 'en';
    return onUnauthorized(() => {
      setToken(null);
      setTokenState(null);
      setMe(null);
    });
  }, []);

  useEffect(() => {
    if (!token) return;
    api<Me>('GET', '/api/auth/me')
      .then(setMe)
      .catch(() => undefined);
  }, [token]);

  useEffect(() => {
    document.title = t('app.title');
  });

  if (!token) {
    return (
      <>
        <header class="top">
          <span class="brand">{t('app.title')}</span>
          <LanguageSwitch />
        </header>
        <main id="main" tabIndex={-1}>
          <LoginPage
            onToken={(next) => {
              setToken(next);
              setTokenState(next);
              if (!location.hash || location.hash === '#/') navigate('/agents');
            }}
          />
        </main>
      </>
    );
  }

  const path = hash.replace(/^#/, '') || '/agents';
  const [, section = 'agents', ...rest] = path.split('/');
  let page;
  if (section === 'agents' && rest[0] === 'new') {
    page = <AgentForm key={`new-${rest[1] ?? ''}`} slug={null} subagent={rest[1] === 'subagent'} />;
  } else if (section === 'agents' && rest[0] === 'edit' && rest[1]) {
    page = <AgentForm key={rest[1]} slug={decodeURIComponent(rest[1])} subagent={false} />;
  } else if (section === 'chat') {
    page = <ChatPage threadId={rest[0] ? decodeURIComponent(rest[0]) : null} />;
  } else if (section === 'runs' && rest[0]) {
    page = <TimelinePage key={rest[0]} runId={decodeURIComponent(rest[0])} />;
  } else if (section === 'runs') {
    page = <RunsPage everyone={me?.role === 'superadmin'} />;
  } else if (section === 'knowledge') {
    page = <KnowledgePage slug={rest[0] ? decodeURIComponent(rest[0]) : null} />;
  } else {
    page = <AgentsPage />;
  }
  const link = (to: string, key: 'nav.agents' | 'nav.chat' | 'nav.runs' | 'nav.knowledge') => (
    <a href={`#/${to}`} aria-current={section === to ? 'page' : undefined}>
      {t(key)}
    </a>
  );
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), main.current?.focus())}>
        {t('app.skip')}
      </a>
      <header class="top">
        <span class="brand">{t('app.title')}</span>
        <nav aria-label={t('nav.label')}>
          {link('agents', 'nav.agents')}
          {link('chat', 'nav.chat')}
          {link('runs', 'nav.runs')}
          {link('knowledge', 'nav.knowledge')}
        </nav>
        <div class="who">
          <LanguageSwitch />
          {me && <span class="uid">{t('app.signedInAs', { uid: me.uid })}</span>}
          <button
            type="button"
            class="link-button"
            onClick={() => {
              setToken(null);
              setTokenState(null);
              setMe(null);
            }}
          >
            {t('app.logout')}
          </button>
        </div>
      </header>
      <main id="main" ref={main} tabIndex={-1}>
        {page}
      </main>
    </>
  );
}
