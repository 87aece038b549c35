// One form creates and edits agents and subagents (`POST /api/agent`, `PUT /api/agent/{slug}`): backend,
// system prompt, model, tools, knowledge bases, MCP servers, skills, subagents (main agents only) and the
// share scopes. The facade judges every write by the admission rules and answers the first broken rule
// with the field it concerns; the form shows that message on that field. An agent the user may only read
// is shown with every control disabled.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, modelChoices, type ModelChoice } from '../api';
import { t, type Key } from '../i18n';
import type { Agent, Scope } from './agents';
import { loadMcpServers, McpPicker, type McpServerOption } from './mcp-picker';

type Level = 'none' | Scope['access_level'];
type ListField = 'tools' | 'knowledges' | 'skills' | 'subagents';

interface ScopeState {
  level: Level;
  uids: string;
  departments: string;
}

interface FormState {
  name: string;
  slug: string;
  description: string;
  backend_id: string;
  system_prompt: string;
  model: string;
  tools: string[] | null;
  knowledges: string[] | null;
  mcps: string[] | null;
  mcp_tools: Record<string, string[]>;
  skills: string[] | null;
  subagents: string[] | null;
  read: ScopeState;
  manage: ScopeState;
}

interface Option {
  value: string;
  label: string;
  description?: string;
}

/** The form's field that a facade error's `field` (in the request's spelling) belongs to. */
export function fieldOf(path: string | null): string | null {
  if (!path) return null;
  const context = path.match(/^config_json\.context\.([a-z_]+)/);
  if (context) return context[1];
  if (path.startsWith('share_config.manage_scope')) return 'manage_scope';
  if (path.startsWith('share_config')) return 'read_scope';
  if (path === 'is_subagent') return 'backend_id';
  const top = path.match(/^([a-z_]+)/);
  return top ? top[1] : null;
}

const FIELDS = new Set([
  'name', 'slug', 'description', 'backend_id', 'system_prompt', 'model', 'tools', 'knowledges', 'mcps',
  'mcp_tools', 'skills', 'subagents', 'read_scope', 'manage_scope',
]);

function scopeState(scope: Scope | null | undefined): ScopeState {
  if (!scope) return { level: 'none', uids: '', departments: '' };
  return {
    level: scope.access_level,
    uids: scope.user_uids.join(', '),
    departments: scope.department_ids.join(', '),
  };
}

function scopeBody(scope: ScopeState): Scope | null {
  if (scope.level === 'none') return null;
  const split = (text: string) => text.split(',').map((s) => s.trim()).filter(Boolean);
  return {
    access_level: scope.level,
    user_uids: scope.level === 'user' ? split(scope.uids) : [],
    department_ids: scope.level === 'department' ? split(scope.departments).map(Number) : [],
  };
}

function initialState(agent: Agent | null, subagent: boolean): FormState {
  const context = agent?.config_json?.context ?? {};
  return {
    name: agent?.name ?? '',
    slug: agent?.slug ?? '',
    description: agent?.description ?? '',
    backend_id: agent?.backend_id ?? (subagent ? 'SubAgentBackend' : 'ChatbotAgent'),
    system_prompt: context.system_prompt ?? '',
    model: context.model ?? '',
    tools: context.tools ?? null,
    knowledges: context.knowledges ?? null,
    mcps: context.mcps ?? null,
    mcp_tools: context.mcp_tools ?? {},
    skills: context.skills ?? null,
    subagents: context.subagents ?? null,
    read: scopeState(agent?.share_config?.read_scope),
    manage: scopeState(agent?.share_config?.manage_scope),
  };
}

/** A labelled control with its hint and its error, tied together for assistive technology. */
function Field(props: {
  id: string;
  label: string;
  hint?: string;
  error?: string;
  children: (aria: Record<string, string | boolean | undefined>) => ComponentChildren;
}) {
  const described = [props.hint ? `${props.id}-hint` : '', props.error ? `${props.id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return (
    <div class={`field${props.error ? ' has-error' : ''}`} data-field={props.id.replace(/^agent-/, '')}>
      <label for={props.id}>{props.label}</label>
      {props.children({ id: props.id, 'aria-describedby': described || undefined, 'aria-invalid': props.error ? 'true' : undefined })}
      {props.hint && (
        <p id={`${props.id}-hint`} class="hint">
          {props.hint}
        </p>
      )}
      {props.error && (
        <p id={`${props.id}-error`} class="field-error">
          {props.error}
        </p>
      )}
    </div>
  );
}

/** A group of checkboxes for a list field; `null` (unset) is said in words until a box is ticked. */
function CheckList(props: {
  id: string;
  legend: string;
  options: Option[];
  value: string[] | null;
  error?: string;
  onChange: (next: string[]) => void;
}) {
  const chosen = new Set(props.value ?? []);
  // Chosen values the options do not list (a catalogue the user cannot see) are kept and shown.
  const options = [...props.options];
  for (const v of chosen) if (!options.some((o) => o.value === v)) options.push({ value: v, label: v });
  return (
    <fieldset
      class={`field checklist${props.error ? ' has-error' : ''}`}
      data-field={props.id.replace(/^agent-/, '')}
      aria-describedby={props.error ? `${props.id}-error` : undefined}
      aria-invalid={props.error ? 'true' : undefined}
    >
      <legend>{props.legend}</legend>
      {props.value === null && <p class="hint">{t('form.unsetAll')}</p>}
      {options.length === 0 && <p class="hint">{t('common.none')}</p>}
      <div class="checks">
        {options.map((option) => (
          <label class="check" title={option.description}>
            <input
              type="checkbox"
              name={props.id}
              value={option.value}
              checked={chosen.has(option.value)}
              onChange={(e) => {
                const next = new Set(chosen);
                if (e.currentTarget.checked) next.add(option.value);
                else next.delete(option.value);
                props.onChange(options.map((o) => o.value).filter((v) => next.has(v)));
              }}
            />
            {option.label}
          </label>
        ))}
      </div>
      {props.error && (
        <p id={`${props.id}-error`} class="field-error">
          {props.error}
        </p>
      )}
    </fieldset>
  );
}

function ScopeFields(props: {
  id: string;
  legend: string;
  value: ScopeState;
  error?: string;
  onChange: (next: ScopeState) => void;
}) {
  const levels: [Level, Key][] = [
    ['none', 'form.level.none'],
    ['global', 'form.level.global'],
    ['department', 'form.level.department'],
    ['user', 'form.level.user'],
  ];
  return (
    <fieldset
      class={`field scope${props.error ? ' has-error' : ''}`}
      data-field={props.id.replace(/^agent-/, '')}
      aria-describedby={props.error ? `${props.id}-error` : undefined}
    >
      <legend>{props.legend}</legend>
      <label for={`${props.id}-level`}>{t('form.accessLevel')}</label>
      <select
        id={`${props.id}-level`}
        value={props.value.level}
        aria-invalid={props.error ? 'true' : undefined}
        onChange={(e) => props.onChange({ ...props.value, level: e.currentTarget.value as Level })}
      >
        {levels.map(([level, key]) => (
          <option value={level}>{t(key)}</option>
        ))}
      </select>
      {props.value.level === 'user' && (
        <>
          <label for={`${props.id}-uids`}>{t('form.userUids')}</label>
          <input
            id={`${props.id}-uids`}
            value={props.value.uids}
            aria-invalid={props.error ? 'true' : undefined}
            onInput={(e) => props.onChange({ ...props.value, uids: e.currentTarget.value })}
          />
        </>
      )}
      {props.value.level === 'department' && (
        <>
          <label for={`${props.id}-departments`}>{t('form.departmentIds')}</label>
          <input
            id={`${props.id}-departments`}
            inputMode="numeric"
            value={props.value.departments}
            aria-invalid={props.error ? 'true' : undefined}
            onInput={(e) => props.onChange({ ...props.value, departments: e.currentTarget.value })}
          />
        </>
      )}
      {props.error && (
        <p id={`${props.id}-error`} class="field-error">
          {props.error}
        </p>
      )}
    </fieldset>
  );
}

export function AgentForm({ slug, subagent }: { slug: string | null; subagent: boolean }) {
  const [agent, setAgent] = useState<Agent | null>(null);
  const [form, setForm] = useState<FormState>(initialState(null, subagent));
  const [loadError, setLoadError] = useState<string | null>(null);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [formError, setFormError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [options, setOptions] = useState<Record<string, Option[]>>({});
  const [mcpServers, setMcpServers] = useState<McpServerOption[]>([]);
  const [models, setModels] = useState<ModelChoice[]>([]);
  useEffect(() => {
    modelChoices().then(setModels).catch(() => setModels([]));
  }, []);
  const [backends, setBackends] = useState<Option[]>([
    { value: 'ChatbotAgent', label: 'ChatbotAgent' },
    { value: 'SubAgentBackend', label: 'SubAgentBackend' },
  ]);
  const heading = useRef<HTMLHeadingElement>(null);
  const formRef = useRef<HTMLFormElement>(null);

  useEffect(() => {
    if (slug) {
      api<{ agent: Agent }>('GET', `/api/agent/${encodeURIComponent(slug)}`)
        .then(({ agent }) => {
          setAgent(agent);
          setForm(initialState(agent, agent.is_subagent));
        })
        .catch((err) => setLoadError(err.message));
    }
    // The catalogues the choices come from; one that cannot be read leaves its list empty.
    const load = async (key: string, path: string, pick: (body: any) => Option[]) => {
      try {
        const body = await api('GET', path);
        setOptions((prev) => ({ ...prev, [key]: pick(body) }));
      } catch {
        setOptions((prev) => ({ ...prev, [key]: [] }));
      }
    };
    load('tools', '/api/system/tools?category=buildin', (b) =>
      b.data.map((x: any) => ({ value: x.slug, label: x.name || x.slug, description: x.description })),
    );
    load('skills', '/api/skills/accessible', (b) =>
      b.data.map((x: any) => ({ value: x.slug, label: x.name || x.slug, description: x.description })),
    );
    load('knowledges', '/api/knowledge', (b) =>
      b.knowledge_bases.map((x: any) => ({ value: x.slug, label: x.name || x.slug, description: x.description })),
    );
    load('subagents', '/api/agent?include_subagents=true', (b) =>
      b.agents
        .filter((x: Agent) => x.is_subagent)
        .map((x: Agent) => ({ value: x.slug, label: x.name || x.slug, description: x.description ?? '' })),
    );
    loadMcpServers().then(setMcpServers);
    api('GET', '/api/agent/backends')
      .then((b) => setBackends(b.backends.map((x: any) => ({ value: x.id, label: `${x.id} (${x.name})`, description: x.description }))))
      .catch(() => undefined);
  }, [slug]);

  useEffect(() => heading.current?.focus(), []);

  const readOnly = agent !== null && !agent.can_manage;
  const isSub = form.backend_id === 'SubAgentBackend';
  const set = <K extends keyof FormState>(key: K, value: FormState[K]) => setForm((prev) => ({ ...prev, [key]: value }));

  const submit = async (e: Event) => {
    e.preventDefault();
    if (readOnly) return;
    setSaved(null);
    setFormError(null);
    if (!form.name.trim()) {
      setErrors({ name: t('form.nameRequired') });
      focusFirstError(['name']);
      return;
    }
    const context: Record<string, unknown> = { ...(agent?.config_json?.context ?? {}) };
    context.system_prompt = form.system_prompt || null;
    context.model = form.model.trim() || null;
    const lists: ListField[] = ['tools', 'knowledges', 'skills'];
    if (!isSub) lists.push('subagents');
    else delete context.subagents;
    for (const key of lists) if (form[key] !== null) context[key] = form[key];
    if (form.mcps !== null) context.mcps = form.mcps;
    const narrowed = Object.fromEntries(Object.entries(form.mcp_tools).filter(([server]) => form.mcps?.includes(server) ?? true));
    if (Object.keys(narrowed).length || context.mcp_tools) context.mcp_tools = Object.keys(narrowed).length ? narrowed : null;
    for (const key of Object.keys(context)) if (context[key] === null && !agent) delete context[key];
    const read = scopeBody(form.read);
    const manage = scopeBody(form.manage);
    const body: Record<string, unknown> = {
      name: form.name,
      description: form.description,
      backend_id: form.backend_id,
      config_json: { context },
    };
    if (read || manage || agent?.share_config) body.share_config = { version: 2, read_scope: read, manage_scope: manage };
    if (!agent && form.slug.trim()) body.slug = form.slug.trim();
    setBusy(true);
    try {
      const answer = agent
        ? await api<{ agent: Agent }>('PUT', `/api/agent/${encodeURIComponent(agent.slug)}`, body)
        : await api<{ agent: Agent }>('POST', '/api/agent', body);
      setErrors({});
      setAgent(answer.agent);
      setForm(initialState(answer.agent, answer.agent.is_subagent));
      setSaved(t('form.saved'));
      if (!agent) history.replaceState(null, '', `#/agents/edit/${encodeURIComponent(answer.agent.slug)}`);
    } catch (err) {
      const error = err as ApiError;
      const field = fieldOf(error.field ?? null);
      if (field && FIELDS.has(field)) {
        // The message starts with the field's path, which the field's place already says.
        const prefix = `${error.field}: `;
        setErrors({ [field]: error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message });
        focusFirstError([field]);
      } else {
        setErrors({});
        setFormError(
          error.field ? t('form.fieldError', { field: error.field, message: error.message }) : t('form.failed', { message: error.message }),
        );
      }
    } finally {
      setBusy(false);
    }
  };

  const focusFirstError = (fields: string[]) =>
    requestAnimationFrame(() => {
      const box = formRef.current?.querySelector<HTMLElement>(`[data-field="${fields[0]}"]`);
      box?.querySelector<HTMLElement>('input, select, textarea')?.focus();
    });

  const remove = async () => {
    if (!agent || !confirm(t('form.confirmDelete', { slug: agent.slug }))) return;
    try {
      await api('DELETE', `/api/agent/${encodeURIComponent(agent.slug)}`);
      location.hash = '#/agents';
    } catch (err) {
      setFormError(t('form.failed', { message: (err as Error).message }));
    }
  };

  const title = !slug && !agent
    ? t(subagent ? 'form.createSubHeading' : 'form.createHeading')
    : readOnly
      ? t('form.viewHeading', { name: agent?.name ?? slug ?? '' })
      : t('form.editHeading', { name: agent?.name ?? slug ?? '' });

  if (loadError) {
    return (
      <p class="error" role="alert">
        {t('common.error', { message: loadError })}
      </p>
    );
  }
  return (
    <section aria-labelledby="form-heading" class="agent-form">
      <h1 id="form-heading" ref={heading} tabIndex={-1}>
        {title}
      </h1>
      {readOnly && (
        <p class="notice" role="note">
          {t(
            agent?.effective_permission !== 'manage'
              ? 'form.readOnlyNotice'
              : agent.read_only_because === 'manifest_file'
                ? 'form.readOnlyManifest'
                : 'form.readOnlyBuiltin',
          )}
        </p>
      )}
      {slug && !agent && <p aria-live="polite">{t('common.loading')}</p>}
      <form ref={formRef} onSubmit={submit} noValidate aria-labelledby="form-heading">
        <fieldset disabled={readOnly || busy || (slug !== null && !agent)} class="plain">
          <div class="grid-2">
            <Field id="agent-name" label={t('form.name')} error={errors.name}>
              {(aria) => <input {...aria} required value={form.name} onInput={(e) => set('name', e.currentTarget.value)} />}
            </Field>
            {!agent ? (
              <Field id="agent-slug" label={t('form.slug')} error={errors.slug}>
                {(aria) => <input {...aria} value={form.slug} onInput={(e) => set('slug', e.currentTarget.value)} />}
              </Field>
            ) : (
              <div class="field">
                <span class="label">{t('agents.slug')}</span>
                <code class="slug-value">{agent.slug}</code>
              </div>
            )}
          </div>
          <Field id="agent-description" label={t('form.description')} error={errors.description}>
            {(aria) => <textarea {...aria} rows={2} value={form.description} onInput={(e) => set('description', e.currentTarget.value)} />}
          </Field>
          <div class="grid-2">
            <Field id="agent-backend_id" label={t('form.backend')} hint={t('form.backendHint')} error={errors.backend_id}>
              {(aria) => (
                <select {...aria} value={form.backend_id} onChange={(e) => set('backend_id', e.currentTarget.value)}>
                  {backends.map((b) => (
                    <option value={b.value}>{b.label}</option>
                  ))}
                </select>
              )}
            </Field>
            <Field id="agent-model" label={t('form.model')} hint={t('form.modelHint')} error={errors.model}>
              {(aria) => (
                <>
                  <input {...aria} list="agent-model-choices" value={form.model} onInput={(e) => set('model', e.currentTarget.value)} />
                  <datalist id="agent-model-choices">
                    {models.map((m) => (
                      <option value={m.spec}>{m.label}</option>
                    ))}
                  </datalist>
                </>
              )}
            </Field>
          </div>
          <Field id="agent-system_prompt" label={t('form.systemPrompt')} error={errors.system_prompt}>
            {(aria) => <textarea {...aria} rows={6} value={form.system_prompt} onInput={(e) => set('system_prompt', e.currentTarget.value)} />}
          </Field>
          <CheckList id="agent-tools" legend={t('form.tools')} options={options.tools ?? []} value={form.tools} error={errors.tools} onChange={(v) => set('tools', v)} />
          <CheckList id="agent-knowledges" legend={t('form.knowledges')} options={options.knowledges ?? []} value={form.knowledges} error={errors.knowledges} onChange={(v) => set('knowledges', v)} />
          <McpPicker
            servers={mcpServers}
            value={form.mcps}
            tools={form.mcp_tools}
            error={errors.mcps}
            toolsError={errors.mcp_tools}
            onChange={(mcps, tools) => setForm((prev) => ({ ...prev, mcps, mcp_tools: tools }))}
          />
          <CheckList id="agent-skills" legend={t('form.skills')} options={options.skills ?? []} value={form.skills} error={errors.skills} onChange={(v) => set('skills', v)} />
          {!isSub && (
            <CheckList
              id="agent-subagents"
              legend={t('form.subagents')}
              options={options.subagents ?? []}
              value={form.subagents}
              error={errors.subagents}
              onChange={(v) => set('subagents', v)}
            />
          )}
          <div class="grid-2">
            <ScopeFields id="agent-read_scope" legend={t('form.readScope')} value={form.read} error={errors.read_scope} onChange={(v) => set('read', v)} />
            <ScopeFields id="agent-manage_scope" legend={t('form.manageScope')} value={form.manage} error={errors.manage_scope} onChange={(v) => set('manage', v)} />
          </div>
        </fieldset>
        {formError && (
          <p class="error" role="alert">
            {formError}
          </p>
        )}
        <p class="status" role="status">
          {saved}
        </p>
        {!readOnly && (
          <div class="actions">
            <button type="submit" disabled={busy}>
              {agent ? t('common.save') : t('form.create')}
            </button>
            {agent && !agent.is_builtin && (
              <button type="button" class="danger" onClick={remove}>
                {t('common.delete')}
              </button>
            )}
          </div>
        )}
      </form>
    </section>
  );
}
