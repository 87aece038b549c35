// The runs page (#/runs): the caller's runs, newest first, from `GET /api/agent/runs`, filtered by words,
// agent, status, kind and time (a superadmin may ask for everyone's). Each run links to its page
// (#/runs/<run_id>). While a listed run has not ended, the first page is read again every 3 s, so
// statuses change as they happen; "More" reads the next page (and stops the reading again, which would
// drop it, until a filter changes).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { statusText, t } from '../i18n';
import { TERMINAL, type ApprovalRecord } from '../transcript';
import type { Agent } from './agents';

/** A run as the list of runs gives it. */
export interface RunRow {
  run_id: string;
  thread_id: string;
  agent_slug: string;
  uid: string;
  status: string;
  run_type: 'chat' | 'subagent' | string;
  created_by_run_id: string | null;
  /** The delegating parent (the resource's camelCase names). */
  parent: { runId: string; threadId: string; agent: string } | null;
  error: string | null;
  created_at: string;
  summary: string | null;
  approvals?: ApprovalRecord[];
}

interface Page {
  runs: RunRow[];
  next_cursor: string | null;
}

/** How often a list with a run that goes on is read again. */
const REFRESH_MS = 3000;

const WINDOWS: Record<string, number> = { hour: 3600_000, day: 24 * 3600_000, week: 7 * 24 * 3600_000 };

/** The query of the filters chosen. */
function search(filters: Record<string, string>, cursor?: string): string {
  const params = new URLSearchParams({ limit: '50' });
  if (filters.q.trim()) params.set('q', filters.q.trim());
  if (filters.agent) params.set('agent_slug', filters.agent);
  if (filters.status) params.set('status', filters.status);
  if (filters.kind) params.set('run_type', filters.kind);
  if (filters.since && WINDOWS[filters.since]) params.set('since', new Date(Date.now() - WINDOWS[filters.since]).toISOString());
  if (filters.scope === 'all') params.set('scope', 'all');
  if (cursor) params.set('cursor', cursor);
  return `/api/agent/runs?${params}`;
}

export function RunsPage({ everyone }: { everyone: boolean }) {
  const [filters, setFilters] = useState({ q: '', agent: '', status: '', kind: '', since: '', scope: 'mine' });
  const [agents, setAgents] = useState<Agent[]>([]);
  const [runs, setRuns] = useState<RunRow[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Once more pages are read, the list is no longer read again (that would drop them).
  const extended = useRef(false);

  useEffect(() => {
    api<{ agents: Agent[] }>('GET', '/api/agent?include_subagents=true')
      .then(({ agents }) => setAgents(agents))
      .catch(() => setAgents([]));
  }, []);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const page = await api<Page>('GET', search(filters));
        if (stopped || extended.current) return;
        setRuns(page.runs);
        setNext(page.next_cursor);
        setError(null);
        if (page.runs.some((r) => !TERMINAL.has(r.status))) timer = setTimeout(load, REFRESH_MS);
      } catch (err) {
        if (!stopped) setError((err as Error).message);
      }
    };
    // Typing settles before the list is asked again.
    timer = setTimeout(load, 250);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [filters]);

  const more = async () => {
    if (!next) return;
    extended.current = true;
    try {
      const page = await api<Page>('GET', search(filters, next));
      setRuns((prev) => [...(prev ?? []), ...page.runs]);
      setNext(page.next_cursor);
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const set = (name: keyof typeof filters) => (e: Event) => {
    const value = (e.currentTarget as HTMLInputElement | HTMLSelectElement).value;
    extended.current = false;
    setFilters((prev) => ({ ...prev, [name]: value }));
  };

  return (
    <section class="runs-page" aria-labelledby="runs-heading">
      <div class="page-head">
        <h1 id="runs-heading">{t('runs.heading')}</h1>
      </div>
      <form class="filters" role="search" aria-label={t('runs.filters')} onSubmit={(e) => e.preventDefault()}>
        <label>
          {t('runs.words')}
          <input type="search" id="runs-q" value={filters.q} onInput={set('q')} />
        </label>
        <label>
          {t('runs.agent')}
          <select id="runs-agent" value={filters.agent} onChange={set('agent')}>
            <option value="">{t('runs.any')}</option>
            {agents.map((a) => (
              <option value={a.slug}>{a.name}</option>
            ))}
          </select>
        </label>
        <label>
          {t('runs.status')}
          <select id="runs-status" value={filters.status} onChange={set('status')}>
            <option value="">{t('runs.any')}</option>
            <option value="active">{t('runs.active')}</option>
            {['waiting', 'completed', 'failed', 'cancelled', 'interrupted'].map((s) => (
              <option value={s}>{statusText(s)}</option>
            ))}
          </select>
        </label>
        <label>
          {t('runs.kind')}
          <select id="runs-kind" value={filters.kind} onChange={set('kind')}>
            <option value="">{t('runs.any')}</option>
            <option value="chat">{t('runs.kind.chat')}</option>
            <option value="subagent">{t('runs.kind.subagent')}</option>
          </select>
        </label>
        <label>
          {t('runs.since')}
          <select id="runs-since" value={filters.since} onChange={set('since')}>
            <option value="">{t('runs.anyTime')}</option>
            <option value="hour">{t('runs.lastHour')}</option>
            <option value="day">{t('runs.lastDay')}</option>
            <option value="week">{t('runs.lastWeek')}</option>
          </select>
        </label>
        {everyone && (
          <label>
            {t('runs.scope')}
            <select id="runs-scope" value={filters.scope} onChange={set('scope')}>
              <option value="mine">{t('runs.mine')}</option>
              <option value="all">{t('runs.everyone')}</option>
            </select>
          </label>
        )}
      </form>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      {runs === null && !error && <p class="muted">{t('common.loading')}</p>}
      {runs !== null && runs.length === 0 && <p class="muted">{t('runs.none')}</p>}
      {runs !== null && runs.length > 0 && (
        <div class="table-wrap">
          <table class="runs">
            <caption class="visually-hidden">{t('runs.caption')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('runs.run')}</th>
                <th scope="col">{t('runs.status')}</th>
                <th scope="col">{t('runs.agent')}</th>
                <th scope="col">{t('runs.kind')}</th>
                <th scope="col">{t('runs.created')}</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((run) => (
                <tr key={run.run_id} data-run={run.run_id} class={`status-${run.status}`}>
                  <th scope="row">
                    <a href={`#/runs/${encodeURIComponent(run.run_id)}`}>{run.summary || run.run_id.slice(0, 8)}</a>
                    {filters.scope === 'all' && <span class="muted small"> · {run.uid}</span>}
                  </th>
                  <td>
                    <span class={`badge status status-${run.status}`}>{statusText(run.status)}</span>
                  </td>
                  <td>{run.agent_slug}</td>
                  <td>
                    {run.run_type === 'subagent' && run.created_by_run_id ? (
                      <a href={`#/runs/${encodeURIComponent(run.created_by_run_id)}`}>
                        {t('runs.kind.subagent')} <span aria-hidden="true">↑</span>
                        <span class="visually-hidden">: {t('runs.parentOf', { id: run.run_id.slice(0, 8) })}</span>
                      </a>
                    ) : (
                      t('runs.kind.chat')
                    )}
                  </td>
                  <td>
                    <time dateTime={run.created_at}>{new Date(run.created_at).toLocaleString()}</time>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {next && (
        <button type="button" onClick={more}>
          {t('runs.more')}
        </button>
      )}
    </section>
  );
}
