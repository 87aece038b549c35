// A conversation as the console shows it, built two ways: from a run's live events (the runner's own
// payloads, `event_format=flat`) and from a thread's persisted messages (`GET /api/threads/{id}/messages`,
// the chat-completions shape). Tool calls carry their results, so the page can fold them together.

/** One approval request of an `interrupt` event (`approval_required`). */
export interface ActionRequest {
  tool_call_id: string;
  name: string;
  arguments: unknown;
  allowed_decisions: string[];
  description?: string;
}

export type Item =
  | { kind: 'user'; key: string; text: string }
  | { kind: 'assistant'; key: string; text: string }
  | {
      kind: 'tool';
      key: string;
      name: string;
      args: unknown;
      result?: string;
      isError?: boolean;
      childRunId?: string;
    }
  | { kind: 'notice'; key: string; text: string }
  | { kind: 'error'; key: string; text: string }
  | { kind: 'end'; key: string; runId: string; status: string; error?: string | null; reason?: string | null }
  | {
      kind: 'approval';
      key: string;
      runId: string;
      requests: ActionRequest[];
      expiresAt?: string | null;
      answered: boolean;
    };

/** An envelope of the run event stream, flat payloads; `?tree=true` adds the run's place in its tree. */
export interface Envelope {
  run_id: string;
  thread_id?: string;
  event: string;
  payload: any;
  parent_run_id?: string | null;
  parent_tool_call_id?: string | null;
  created_at?: string;
}

/** The terminal statuses of a run. */
export const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'interrupted']);

function text(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return JSON.stringify(value, null, 2);
}

/** The transcript with one more live event of its run applied (a new array; items changed are new). */
export function applyEvent(items: Item[], envelope: Envelope): Item[] {
  const p = envelope.payload ?? {};
  const next = items.slice();
  // An approval is answered once its run goes on.
  if (envelope.event !== 'interrupt') {
    for (let i = 0; i < next.length; i++) {
      const item = next[i];
      if (item.kind === 'approval' && !item.answered && item.runId === envelope.run_id) next[i] = { ...item, answered: true };
    }
  }
  switch (envelope.event) {
    case 'metadata': {
      // The run's input: the question of a chat run (already shown when this page sent it, or read
      // with the thread's messages, which hold it from the run's start), the task of a subagent's.
      const last = next[next.length - 1];
      const shown = last?.kind === 'user' && last.text === p.input;
      if (typeof p.input === 'string' && p.input && !shown && !next.some((i) => i.key === `u-${envelope.run_id}`)) {
        next.push({ kind: 'user', key: `u-${envelope.run_id}`, text: p.input });
      }
      break;
    }
    case 'messages': {
      if (p.type === 'message_delta') {
        const key = `m-${p.message_id ?? 'x'}`;
        const at = next.findIndex((i) => i.key === key);
        if (at >= 0) {
          const item = next[at] as Extract<Item, { kind: 'assistant' }>;
          next[at] = { ...item, text: item.text + (p.content ?? '') };
        } else next.push({ kind: 'assistant', key, text: p.content ?? '' });
      } else if (p.type === 'tool_call') {
        // Tool call ids are only unique within a run (a scripted model numbers them from 0 each run).
        const key = `t-${envelope.run_id}-${p.tool_call_id}`;
        if (!next.some((i) => i.key === key)) next.push({ kind: 'tool', key, name: p.name, args: parseArgs(p.args) });
      } else if (p.type === 'tool_result') {
        const key = `t-${envelope.run_id}-${p.tool_call_id}`;
        const at = next.findIndex((i) => i.key === key);
        const result = {
          result: text(p.content),
          isError: Boolean(p.is_error),
          childRunId: p.child_run_id ?? undefined,
        };
        if (at >= 0) next[at] = { ...(next[at] as Extract<Item, { kind: 'tool' }>), ...result };
        else next.push({ kind: 'tool', key, name: p.name, args: undefined, ...result });
      }
      break;
    }
    case 'custom':
      if (p.type === 'subagent_notice') {
        next.push({ kind: 'notice', key: `n-${next.length}`, text: `${p.subagent_slug ?? ''} ${p.run_id}: ${p.status}` });
      } else if (p.type === 'model_retry') {
        next.push({ kind: 'notice', key: `n-${next.length}`, text: `model retry ${p.attempt}/${p.of}: ${p.error}` });
      }
      break;
    case 'interrupt':
      if (p.type === 'approval_required') {
        next.push({
          kind: 'approval',
          key: `a-${envelope.run_id}-${next.length}`,
          runId: envelope.run_id,
          requests: Array.isArray(p.action_requests) ? p.action_requests : [],
          expiresAt: p.expires_at ?? null,
          answered: false,
        });
      }
      break;
    case 'error':
      next.push({ kind: 'error', key: `e-${next.length}`, text: text(p.message) });
      break;
    case 'end':
      next.push({
        kind: 'end',
        key: `end-${envelope.run_id}`,
        runId: envelope.run_id,
        status: p.status,
        error: p.error ?? null,
        reason: p.reason ?? null,
      });
      break;
  }
  return next;
}

/** A persisted message (chat-completions shape). */
export interface StoredMessage {
  role: string;
  content?: unknown;
  tool_calls?: { id: string; function?: { name: string; arguments?: string }; name?: string; args?: unknown }[];
  tool_call_id?: string;
}

function contentText(content: unknown): string {
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === 'string' ? part : (part?.text ?? ''))).join('');
  }
  return text(content);
}

function parseArgs(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** The transcript of a thread's persisted messages; system prompts are left out. */
export function fromMessages(messages: StoredMessage[], prefix = 'h'): Item[] {
  const items: Item[] = [];
  // Where the latest call of each tool call id is: ids repeat across the runs of a thread.
  const calls = new Map<string, number>();
  messages.forEach((message, n) => {
    const key = `${prefix}-${n}`;
    if (message.role === 'user') {
      const said = contentText(message.content);
      // The runner's wake-up notices are user messages of the history, but no one typed them.
      if (said.startsWith('[notice]')) items.push({ kind: 'notice', key, text: said.slice('[notice]'.length).trim() });
      else items.push({ kind: 'user', key, text: said });
    } else if (message.role === 'assistant') {
      const said = contentText(message.content);
      if (said) items.push({ kind: 'assistant', key, text: said });
      for (const call of message.tool_calls ?? []) {
        calls.set(call.id, items.length);
        items.push({
          kind: 'tool',
          key: `${key}-${call.id}`,
          name: call.function?.name ?? call.name ?? '?',
          args: parseArgs(call.function?.arguments ?? call.args),
        });
      }
    } else if (message.role === 'tool') {
      const at = calls.get(message.tool_call_id ?? '') ?? -1;
      const result = contentText(message.content);
      let childRunId: string | undefined;
      try {
        const parsed = JSON.parse(result);
        if (parsed && typeof parsed.run_id === 'string') childRunId = parsed.run_id;
      } catch {
        // Not JSON: no child run.
      }
      if (at >= 0) items[at] = { ...(items[at] as Extract<Item, { kind: 'tool' }>), result, childRunId };
      else items.push({ kind: 'tool', key, name: '?', args: undefined, result, childRunId });
    }
  });
  return items;
}

/** The last few readable lines of a run's events: what it said and the tools it called. */
export function progressLines(items: Item[], count = 3): string[] {
  const lines: string[] = [];
  for (const item of items) {
    if (item.kind === 'assistant' && item.text.trim()) lines.push(item.text.trim().split('\n').filter(Boolean).slice(-1)[0]);
    else if (item.kind === 'tool') lines.push(`→ ${item.name}${item.result !== undefined ? (item.isError ? ' ✗' : ' ✓') : ' …'}`);
  }
  return lines.slice(-count).map((line) => (line.length > 160 ? `${line.slice(0, 157)}…` : line));
}
