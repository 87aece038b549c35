// The facade's public API, as the console uses it: every call carries the user's bearer token, kept in the
// browser session (sessionStorage) from the login on. Nothing here talks to anything but the facade.

const TOKEN_KEY = 'yuxi.token';

/** The bearer token of this browser session, or null before a login. */
export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps (or, with null, forgets) the bearer token for this browser session. */
export function setToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** An answer that is not a success: the facade's `{code, message, field?}` and the HTTP status. */
export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public field: string | null,
  ) {
    super(message);
  }
}

/** Listeners told when a call answers 401, so the console can go back to its login. */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

async function errorOf(response: Response): Promise<ApiError> {
  let code = `http_${response.status}`;
  let message = response.statusText || `HTTP ${response.status}`;
  let field: string | null = null;
  try {
    const body = await response.json();
    if (body && typeof body === 'object') {
      if (typeof body.code === 'string') code = body.code;
      if (typeof body.message === 'string') message = body.message;
      else if (typeof body.detail === 'string') message = body.detail;
      if (typeof body.field === 'string') field = body.field;
    }
  } catch {
    // Not JSON: the status says enough.
  }
  if (response.status === 401) unauthorizedListeners.forEach((l) => l());
  return new ApiError(response.status, code, message, field);
}

function headers(extra: Record<string, string> = {}, token = getToken()): Record<string, string> {
  const h: Record<string, string> = { ...extra };
  if (token) h['Authorization'] = `Bearer ${token}`;
  return h;
}

/** Calls the facade: JSON in and out. A 204 answers null. Errors are thrown as ApiError. */
export async function api<T = any>(method: string, path: string, body?: unknown, token?: string): Promise<T> {
  const init: RequestInit = { method, headers: headers({ Accept: 'application/json' }, token ?? getToken()) };
  if (body instanceof FormData || body instanceof URLSearchParams) {
    init.body = body;
  } else if (body !== undefined) {
    (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return null as T;
  return (await response.json()) as T;
}

/** One model a person may pick: what `model_spec` takes, and what is shown. */
export interface ModelChoice {
  spec: string;
  label: string;
  /** A Model resource (shared by its share rule), not the installation's `<provider>/<model>`. */
  resource: boolean;
}

/** The models the caller may pick (`GET /api/system/model-providers/models/v2`), Model resources first. */
export async function modelChoices(): Promise<ModelChoice[]> {
  const answer = await api<{ data: Record<string, { provider_display_name: string; models: { spec: string; display_name: string }[] }> }>(
    'GET',
    '/api/system/model-providers/models/v2?model_type=chat',
  );
  const choices: ModelChoice[] = [];
  for (const [id, provider] of Object.entries(answer.data ?? {})) {
    for (const model of provider.models ?? []) {
      const resource = id === 'models';
      choices.push({ spec: model.spec, label: resource ? model.display_name : `${model.display_name} (${provider.provider_display_name})`, resource });
    }
  }
  return choices.sort((a, b) => Number(b.resource) - Number(a.resource));
}

/** The local mode's password login (`POST /api/auth/token`): the user's bearer token. */
export async function login(username: string, password: string): Promise<string> {
  const form = new URLSearchParams({ username, password });
  const answer = await api<{ access_token: string }>('POST', '/api/auth/token', form, '');
  return answer.access_token;
}

/** One server-sent event. */
export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/**
 * Reads server-sent events from a byte stream: `id`, `event` and `data` fields (several `data` lines
 * joined by newlines), comments (`:`) skipped, an event dispatched at each blank line. Lines may end in
 * `\n`, `\r\n` or `\r`.
 */
export class SseParser {
  private buffer = '';
  private id: string | null = null;
  private event = '';
  private data: string[] = [];
  private sawData = false;
  private pendingCr = false;

  constructor(private dispatch: (event: SseEvent) => void) {}

  /** Feeds decoded text; calls dispatch for each complete event. */
  push(text: string): void {
    if (this.pendingCr && text.startsWith('\n')) text = text.slice(1);
    this.pendingCr = false;
    this.buffer += text;
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (!match) break;
      // A lone \r at the end of the buffer may be the first half of \r\n.
      if (match[0] === '\r' && match.index === this.buffer.length - 1) {
        this.pendingCr = true;
      }
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.sawData) this.dispatch({ id: this.id, event: this.event || 'message', data: this.data.join('\n') });
      this.event = '';
      this.data = [];
      this.sawData = false;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'data') {
      this.data.push(value);
      this.sawData = true;
    } else if (name === 'event') this.event = value;
    else if (name === 'id' && !value.includes('\0')) this.id = value;
  }
}

/** How a stream reader ended. */
export type StreamEnd = 'ended' | 'aborted' | 'failed';

/**
 * Follows a server-sent event stream of the facade with fetch (EventSource cannot send the bearer token),
 * reconnecting with `Last-Event-ID` after a dropped connection until `done()` says the stream is complete
 * or `signal` aborts. Resolves with how it ended.
 */
export async function followEvents(
  path: string,
  onEvent: (event: SseEvent) => void,
  options: { signal: AbortSignal; done: () => boolean; onError?: (error: Error) => void },
): Promise<StreamEnd> {
  let lastId: string | null = null;
  let failures = 0;
  while (!options.signal.aborted) {
    try {
      const extra: Record<string, string> = { Accept: 'text/event-stream' };
      if (lastId) extra['Last-Event-ID'] = lastId;
      const response = await fetch(path, { headers: headers(extra), signal: options.signal });
      if (!response.ok) {
        const error = await errorOf(response);
        // A client error will not mend by retrying.
        if (response.status < 500) {
          options.onError?.(error);
          return 'failed';
        }
        throw error;
      }
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      const parser = new SseParser((event) => {
        if (event.id) lastId = event.id;
        failures = 0;
        onEvent(event);
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(value);
      }
      if (options.done()) return 'ended';
    } catch (error) {
      if (options.signal.aborted) return 'aborted';
      failures += 1;
      if (failures > 5) {
        options.onError?.(error as Error);
        return 'failed';
      }
    }
    if (options.done()) return 'ended';
    await new Promise((resolve) => setTimeout(resolve, Math.min(4000, 250 * 2 ** failures)));
  }
  return 'aborted';
}

/** One span of a run tree's timeline: a run, one of its model calls, or one of its tool calls. */
export interface TraceSpan {
  /** The run id, `<run>/chat/<n>` or `<run>/tool/<call id>`. */
  span_id: string;
  /** The span it is part of: a run's for its calls, the tool call that started it for a child run. */
  parent_span_id: string | null;
  run_id: string;
  kind: 'run' | 'chat' | 'tool' | string;
  /** `invoke_agent <agent>`, `chat <model>` or `execute_tool <tool>`. */
  name: string;
  /** RFC 3339. */
  start: string;
  /** RFC 3339; null while it goes on. */
  end: string | null;
  duration_ms: number | null;
  /** A run's status, or `ok`, `error`, `running` for a call. */
  status: string;
  /** The exported span's attributes: tokens, cost, model, tool, result size. */
  attributes: Record<string, unknown>;
}

/** The answer of `GET /api/agent/runs/{run_id}/trace`. */
export interface RunTrace {
  run_id: string;
  trace_id: string | null;
  /** The trace in the tracing backend, when the installation links one. */
  trace_url: string | null;
  /** Spans in tree order: each run's own first, then its model and tool calls, then its children's. */
  spans: TraceSpan[];
  /** Whether the tree was larger than one answer reads. */
  truncated: boolean;
}

/** The timeline of a run and every run under it (`GET /api/agent/runs/{run_id}/trace`); 404 for a run not the caller's. */
export function runTrace(runId: string): Promise<RunTrace> {
  return api<RunTrace>('GET', `/api/agent/runs/${encodeURIComponent(runId)}/trace`);
}

/** Whether the facade offers a login through an OIDC issuer (`GET /api/auth/oidc/config`). */
export async function oidcConfig(): Promise<{ enabled: boolean; provider_name: string | null }> {
  return api('GET', '/api/auth/oidc/config', undefined, '');
}

/** Starts the login at the OIDC issuer: the browser leaves for its authorization address. */
export async function startOidcLogin(): Promise<void> {
  const answer = await api<{ login_url: string }>('GET', '/api/auth/oidc/login-url', undefined, '');
  location.assign(answer.login_url);
}

/**
 * Finishes the login the facade's callback sent the browser back from (`#/oidc?code=…` or `?error=…`):
 * the one-time code exchanged for the bearer token (its cookie goes with the request).
 */
export async function finishOidcLogin(query: string): Promise<string> {
  const params = new URLSearchParams(query);
  const error = params.get('error');
  if (error) throw new Error(error);
  const code = params.get('code');
  if (!code) throw new Error('no login code');
  const answer = await api<{ access_token: string }>('POST', '/api/auth/oidc/exchange-code', { code }, '');
  return answer.access_token;
}
