// The agents the user can see, subagents included (`GET /api/agent?include_subagents=true`): backend,
// subagent flag, sharing, default, and whether the user may change each one.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { t } from '../i18n';

/** A share scope, as the facade speaks it. */
export interface Scope {
  access_level: 'global' | 'department' | 'user';
  department_ids: number[];
  user_uids: string[];
}

/** An agent item of the facade. */
export interface Agent {
  slug: string;
  name: string;
  description: string | null;
  backend_id: string;
  is_subagent: boolean;
  is_default: boolean;
  is_builtin: boolean;
  can_manage: boolean;
  /** `read` or `manage`: the caller's rights, whether or not the agent can be changed. */
  effective_permission: 'read' | 'manage';
  /** Why nobody may change it through the API (the local mode's manifest files and built-ins). */
  read_only_because?: 'built_in' | 'manifest_file';
  config_json: { context?: Record<string, any> } | null;
  share_config: { read_scope?: Scope | null; manage_scope?: Scope | null } | null;
  created_by: string | null;
  /** In a cluster: the Agent's `Accepted` and `Ready` conditions. */
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
}

/** A manifest file of the local mode whose current version is not in force. */
export interface ManifestProblem {
  file: string;
  errors: string[];
  /** Whether its last good version is in force instead. */
  last_good_in_force: boolean;
}

/** How the local mode's manifests folder last applied (shown to administrators). */
export interface ManifestsStatus {
  folder: string;
  applied_at: string | null;
  problems: ManifestProblem[];
}

/** The local mode's manifest files that were not applied, each with its errors. */
function ManifestProblems({ status }: { status: ManifestsStatus | undefined }) {
  if (!status || status.problems.length === 0) return null;
  return (
    <div class="manifest-problems" role="alert">
      <h2>{t('agents.manifests.heading', { folder: status.folder })}</h2>
      <ul>
        {status.problems.map((problem) => (
          <li data-file={problem.file}>
            <code>{problem.file}</code>{' '}
            <span class="muted">
              {problem.last_good_in_force ? t('agents.manifests.lastGood') : t('agents.manifests.none')}
            </span>
            <ul>
              {problem.errors.map((error) => (
                <li class="bad">{error}</li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The access level of a scope in words. */
export function scopeText(scope: Scope | null | undefined): string {
  if (!scope) return t('common.none');
  const who =
    scope.access_level === 'global'
      ? t('agents.scope.global')
      : scope.access_level === 'department'
        ? `${t('agents.scope.department')} ${scope.department_ids.join(', ')}`
        : `${t('agents.scope.user')} ${scope.user_uids.join(', ')}`;
  return who;
}

/** The Kubernetes conditions of an agent, when the facade gives them (in a cluster). */
function Conditions({ agent }: { agent: Agent }) {
  const conditions = agent.conditions ?? [];
  const shown = conditions.filter((c) => c.type === 'Accepted' || c.type === 'Ready');
  if (shown.length === 0) return null;
  return (
    <ul class="conditions">
      {shown.map((c) => (
        <li class={c.status === 'True' ? 'ok' : 'bad'}>
          {c.type}: {c.status}
          {c.status !== 'True' && c.reason ? ` (${c.reason}${c.message ? `: ${c.message}` : ''})` : ''}
        </li>
      ))}
    </ul>
  );
}

export function AgentsPage() {
  const [agents, setAgents] = useState<Agent[] | null>(null);
  const [manifests, setManifests] = useState<ManifestsStatus | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    api<{ agents: Agent[]; manifests?: ManifestsStatus }>('GET', '/api/agent?include_subagents=true')
      .then((answer) => {
        setAgents(answer.agents);
        setManifests(answer.manifests);
      })
      .catch((err) => setError(err.message));
  }, []);

  return (
    <section aria-labelledby="agents-heading">
      <div class="page-head">
        <h1 id="agents-heading">{t('agents.heading')}</h1>
        <div class="actions">
          <a class="button" href="#/agents/new">
            {t('agents.new')}
          </a>
          <a class="button" href="#/agents/new/subagent">
            {t('agents.newSub')}
          </a>
        </div>
      </div>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      <ManifestProblems status={manifests} />
      {!agents && !error && <p aria-live="polite">{t('common.loading')}</p>}
      {agents && agents.length === 0 && <p>{t('agents.empty')}</p>}
      {agents && agents.length > 0 && (
        <div class="table-wrap">
          <table class="agents">
            <thead>
              <tr>
                <th scope="col">{t('agents.name')}</th>
                <th scope="col">{t('agents.backend')}</th>
                <th scope="col">{t('agents.subagent')}</th>
                <th scope="col">{t('agents.sharing')}</th>
                <th scope="col">{t('agents.default')}</th>
                <th scope="col">{t('agents.access')}</th>
              </tr>
            </thead>
            <tbody>
              {agents.map((agent) => (
                <tr data-slug={agent.slug}>
                  <td data-label={t('agents.name')}>
                    <a
                      href={`#/agents/edit/${encodeURIComponent(agent.slug)}`}
                      aria-label={t(agent.can_manage ? 'agents.edit' : 'agents.view', { name: agent.name })}
                    >
                      {agent.name}
                    </a>
                    <div class="muted slug">{agent.slug}</div>
                    <Conditions agent={agent} />
                  </td>
                  <td data-label={t('agents.backend')}>{agent.backend_id}</td>
                  <td data-label={t('agents.subagent')}>{agent.is_subagent ? t('common.yes') : t('common.no')}</td>
                  <td data-label={t('agents.sharing')}>{t('agents.read', { scope: scopeText(agent.share_config?.read_scope) })}</td>
                  <td data-label={t('agents.default')}>{agent.is_default ? t('common.yes') : t('common.no')}</td>
                  <td data-label={t('agents.access')}>
                    {agent.can_manage ? (
                      <span class="badge manage">{t('agents.manage')}</span>
                    ) : (
                      <span class="badge readonly">{t('agents.readOnly')}</span>
                    )}
                    {agent.is_builtin && <span class="badge">{t('agents.builtin')}</span>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
