// A conversation as the console shows it: one model of items (questions, answers, tool calls with their
// results, approvals asked and decided, each run's end) built two ways. While a run goes on, from its live
// events (the runner's own payloads, `event_format=flat`: [`applyEvent`]); once it has ended, and whenever a
// conversation is opened, from what the facade keeps: the thread's messages (`GET /api/threads/{id}/messages`,
// the chat-completions shape) cut into its runs (`GET /api/agent/runs?thread_id=…`), with each run's
// decisions and end ([`fromConversation`]). A live conversation is read the second way when its run ends, so
// it reads the same as it will when reopened. Notices written for the model are left out of both.
import { instant } from './time';

/** One approval request of an `interrupt` event (`approval_required`). */
export interface ActionRequest {
  tool_call_id: string;
  name: string;
  arguments: unknown;
  allowed_decisions: string[];
  description?: string;
}

/** A decision a person made on a call, as the run keeps it (`approvals` of `GET /api/agent/runs/{id}`). */
export interface ApprovalRecord {
  tool_call_id: string;
  name: string;
  decision: 'approve' | 'edit' | 'reject' | string;
  decided_by: string;
  decided_at: string;
}

export type Item =
  | { kind: 'user'; key: string; text: string }
  | { kind: 'assistant'; key: string; text: string }
  | {
      kind: 'tool';
      key: string;
      callId?: string;
      name: string;
      args: unknown;
      result?: string;
      isError?: boolean;
      childRunId?: string;
    }
  | {
      kind: 'end';
      key: string;
      runId: string;
      status: string;
      error?: string | null;
      reason?: string | null;
      /** How long the run took, in milliseconds, when known. */
      durationMs?: number | null;
      /** The tokens its model calls used (prompt, completion), when known. */
      tokens?: { input: number; output: number } | null;
    }
  | {
      kind: 'approval';
      key: string;
      runId: string;
      requests: ActionRequest[];
      expiresAt?: string | null;
      answered: boolean;
    }
  | { kind: 'decided'; key: string; runId: string; records: ApprovalRecord[] };

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
      // with the thread's messages, which hold it from the run's start), the task of a subagent's. A
      // resumed run says it again.
      const since = next.map((i) => i.kind).lastIndexOf('end');
      const shown = next.slice(since + 1).some((i) => i.kind === 'user' && i.text === p.input);
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
        if (!next.some((i) => i.key === key)) next.push({ kind: 'tool', key, callId: p.tool_call_id, name: p.name, args: parseArgs(p.args) });
      } else if (p.type === 'tool_result') {
        const key = `t-${envelope.run_id}-${p.tool_call_id}`;
        const at = next.findIndex((i) => i.key === key);
        const content = text(p.content);
        const result = {
          result: content,
          isError: Boolean(p.is_error),
          childRunId: p.child_run_id ?? childRunOf(content),
        };
        if (at >= 0) next[at] = { ...(next[at] as Extract<Item, { kind: 'tool' }>), ...result };
        else next.push({ kind: 'tool', key, callId: p.tool_call_id, name: p.name, args: undefined, ...result });
      }
      break;
    }
    // Notices (a subagent's progress, a model's retry) are for the moment: the subagent panel and the
    // run's end say what lasts, and a reopened conversation has no notices either.
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
    // A run's error is said by its end, as a reopened conversation says it.
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

/** The child run a delegation tool's result names (`{run_id, ...}` JSON), if any. */
export function childRunOf(result: string | undefined): string | undefined {
  try {
    const parsed = JSON.parse(result ?? '');
    return parsed && typeof parsed.run_id === 'string' ? parsed.run_id : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a stored user message is one of the runner's wake-up notices, written for the model. */
function isNotice(message: StoredMessage): boolean {
  return message.role === 'user' && contentText(message.content).startsWith('[notice]');
}

/** The transcript of persisted messages; system prompts and notices written for the model are left out. */
export function fromMessages(messages: StoredMessage[], prefix = 'h'): Item[] {
  const items: Item[] = [];
  // Where the latest call of each tool call id is: ids repeat across the runs of a thread.
  const calls = new Map<string, number>();
  messages.forEach((message, n) => {
    const key = `${prefix}-${n}`;
    if (isNotice(message)) return;
    if (message.role === 'user') {
      items.push({ kind: 'user', key, text: contentText(message.content) });
    } else if (message.role === 'assistant') {
      const said = contentText(message.content);
      if (said) items.push({ kind: 'assistant', key, text: said });
      for (const call of message.tool_calls ?? []) {
        calls.set(call.id, items.length);
        items.push({
          kind: 'tool',
          key: `${key}-${call.id}`,
          callId: call.id,
          name: call.function?.name ?? call.name ?? '?',
          args: parseArgs(call.function?.arguments ?? call.args),
        });
      }
    } else if (message.role === 'tool') {
      const at = calls.get(message.tool_call_id ?? '') ?? -1;
      const result = contentText(message.content);
      const childRunId = childRunOf(result);
      if (at >= 0) items[at] = { ...(items[at] as Extract<Item, { kind: 'tool' }>), result, childRunId };
      else items.push({ kind: 'tool', key, callId: message.tool_call_id, name: '?', args: undefined, result, childRunId });
    }
  });
  return items;
}

/** A run of a conversation as the list of runs gives it (`GET /api/agent/runs?thread_id=…`). */
export interface RunInfo {
  run_id: string;
  status: string;
  error?: string | null;
  created_at: string;
  approvals?: ApprovalRecord[];
  /** When it ended, RFC 3339. */
  ended_at?: string | null;
  /** Why it ended so, from its result (`ApprovalTimeout`, `BudgetExceeded`). */
  reason?: string | null;
  /** The tokens it used, from its result. */
  tokens?: { input: number; output: number } | null;
}

/** How long a run took, in milliseconds, from its start and end times; null when either is unknown. */
export function runDuration(createdAt: string | null | undefined, endedAt: string | null | undefined): number | null {
  const start = instant(createdAt);
  const end = instant(endedAt);
  return start === null || end === null ? null : Math.max(0, end - start);
}

/** The decisions of one answer (made together) as a transcript item. */
function decidedItem(runId: string, records: ApprovalRecord[], key: string): Item {
  return { kind: 'decided', key, runId, records };
}

/** The runs' decisions placed after the calls they decided, each answer after its last call of `items`. */
function placeDecisions(items: Item[], run: RunInfo): Item[] {
  const groups = new Map<string, ApprovalRecord[]>();
  for (const record of run.approvals ?? []) {
    const group = groups.get(record.decided_at);
    if (group) group.push(record);
    else groups.set(record.decided_at, [record]);
  }
  const out = items.slice();
  let n = 0;
  for (const records of groups.values()) {
    const ids = new Set(records.map((r) => r.tool_call_id));
    let at = -1;
    out.forEach((item, i) => {
      if (item.kind === 'tool' && item.callId && ids.has(item.callId)) at = i;
    });
    // After every call of that turn, as the live run asked after the model's whole turn.
    while (at >= 0 && out[at + 1]?.kind === 'tool') at++;
    const item = decidedItem(run.run_id, records, `d-${run.run_id}-${n++}`);
    if (at >= 0) out.splice(at + 1, 0, item);
    else out.push(item);
  }
  return out;
}

/**
 * A conversation as it was lived, from what the facade keeps: its messages cut into its runs (each run
 * starts with the question it was asked; the latest runs the latest questions), each run's decisions after
 * the calls they decided, and each finished run's end. What a live run showed, rebuilt the same way.
 */
export function fromConversation(messages: StoredMessage[], runs: RunInfo[]): Item[] {
  const starts: number[] = [];
  messages.forEach((message, n) => {
    if (message.role === 'user' && !isNotice(message)) starts.push(n);
  });
  const ordered = [...runs].sort((a, b) => a.created_at.localeCompare(b.created_at));
  const shift = starts.length - ordered.length;
  const items: Item[] = [];
  // What comes before the first run the list still names.
  const first = Math.max(0, shift);
  items.push(...fromMessages(messages.slice(0, starts[first] ?? messages.length), 'h0'));
  for (let k = first; k < starts.length; k++) {
    const run = ordered[k - shift];
    const part = fromMessages(messages.slice(starts[k], starts[k + 1] ?? messages.length), `h${starts[k]}`);
    if (!run) {
      items.push(...part);
      continue;
    }
    items.push(...placeDecisions(part, run));
    if (TERMINAL.has(run.status)) {
      items.push({
        kind: 'end',
        key: `end-${run.run_id}`,
        runId: run.run_id,
        status: run.status,
        error: run.error ?? null,
        reason: run.reason ?? null,
        durationMs: runDuration(run.created_at, run.ended_at),
        tokens: run.tokens ?? null,
      });
    }
  }
  return items;
}

/** The live transcript once `runId`'s answered approvals are known: each becomes its decisions (none: gone). */
export function withDecisions(items: Item[], runId: string, records: ApprovalRecord[]): Item[] {
  const out: Item[] = [];
  for (const item of items) {
    if (item.kind !== 'approval' || item.runId !== runId || !item.answered) {
      out.push(item);
      continue;
    }
    const asked = new Set(item.requests.map((r) => r.tool_call_id));
    const mine = records.filter((r) => asked.has(r.tool_call_id));
    // Grouped as the reopened conversation groups them: one item per answer.
    const groups = new Map<string, ApprovalRecord[]>();
    for (const record of mine) groups.set(record.decided_at, [...(groups.get(record.decided_at) ?? []), record]);
    let n = 0;
    for (const group of groups.values()) out.push(decidedItem(runId, group, `${item.key}-d${n++}`));
  }
  return out;
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
