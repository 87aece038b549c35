// Shows a transcript: messages as they arrive, each tool call folded with its result (a disclosure the
// keyboard opens), the run's end, and approval requests as buttons.
import { useState } from 'preact/hooks';
import { api } from '../api';
import { statusText, t, type Key } from '../i18n';
import { renderMarkdown } from '../markdown';
import { formatDuration } from '../time';
import type { ActionRequest, Item } from '../transcript';

function pretty(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') {
    // A JSON text (a tool's result often is one) is shown indented.
    const trimmed = value.trim();
    if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
      try {
        return JSON.stringify(JSON.parse(trimmed), null, 2);
      } catch {
        return value;
      }
    }
    return value;
  }
  return JSON.stringify(value, null, 2);
}

/** The most lines of a tool's arguments or result shown before "Show all". */
const FOLDED_LINES = 16;

/** A block of text, its first lines only until the reader asks for the rest. */
function Folded({ text }: { text: string }) {
  const [open, setOpen] = useState(false);
  const lines = text.split('\n');
  const long = lines.length > FOLDED_LINES;
  return (
    <>
      <pre>{long && !open ? `${lines.slice(0, FOLDED_LINES).join('\n')}\n…` : text}</pre>
      {long && (
        <button type="button" class="link-button" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? t('chat.showLess') : t('chat.showAll', { lines: lines.length })}
        </button>
      )}
    </>
  );
}

/** Markdown a run wrote, rendered safely ([`renderMarkdown`]). */
export function MarkdownText({ text }: { text: string }) {
  return <div class="text markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(text) }} />;
}

/** The subagent a delegation tool's result names, if it is JSON naming one. */
function childSlug(result: string | undefined): string | null {
  try {
    const slug = JSON.parse(result ?? '').subagent_slug;
    return typeof slug === 'string' ? slug : null;
  } catch {
    return null;
  }
}

type Decision = { decision: 'approve' | 'reject' | 'edit'; arguments?: string };

/**
 * The answer to an `approval_required` interrupt: a decision for each action request (approve, reject,
 * or edit its arguments and approve), an optional message, sent as `POST /api/agent/runs` with
 * `{resume: {run_id, decisions}}`. The run then goes on, in the same event stream.
 */
export function ApprovalCard({ item }: { item: Extract<Item, { kind: 'approval' }> }) {
  const [decisions, setDecisions] = useState<Record<string, Decision>>({});
  const [message, setMessage] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [sent, setSent] = useState(false);
  const [busy, setBusy] = useState(false);
  const done = sent || item.answered;

  const choose = (request: ActionRequest, decision: Decision['decision']) =>
    setDecisions((prev) => ({
      ...prev,
      [request.tool_call_id]: {
        decision,
        arguments: decision === 'edit' ? (prev[request.tool_call_id]?.arguments ?? pretty(request.arguments)) : undefined,
      },
    }));

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const out = [];
    for (const request of item.requests) {
      const chosen = decisions[request.tool_call_id];
      if (!chosen) continue;
      const decision: Record<string, unknown> = { tool_call_id: request.tool_call_id, decision: chosen.decision };
      if (chosen.decision === 'edit') {
        try {
          decision.arguments = JSON.parse(chosen.arguments ?? '');
        } catch (err) {
          setError(t('approval.badJson', { message: (err as Error).message }));
          return;
        }
      }
      if (message.trim()) decision.message = message.trim();
      out.push(decision);
    }
    setBusy(true);
    try {
      await api('POST', '/api/agent/runs', { resume: { run_id: item.runId, decisions: out } });
      setSent(true);
    } catch (err) {
      setError(t('common.error', { message: (err as Error).message }));
    } finally {
      setBusy(false);
    }
  };

  const allChosen = item.requests.every((r) => decisions[r.tool_call_id]);
  const headingId = `${item.key}-heading`;
  return (
    <form class="approval" aria-labelledby={headingId} onSubmit={submit}>
      <h3 id={headingId}>{t('approval.heading')}</h3>
      {item.expiresAt && <p class="hint">{t('approval.expires', { time: new Date(item.expiresAt).toLocaleString() })}</p>}
      {item.requests.map((request) => {
        const chosen = decisions[request.tool_call_id];
        const allowed = request.allowed_decisions?.length ? request.allowed_decisions : ['approve', 'reject'];
        return (
          <div class="action-request" data-tool-call={request.tool_call_id}>
            <p>
              <strong>{request.name}</strong> {request.description}
            </p>
            <pre class="args">{pretty(request.arguments)}</pre>
            <div class="decisions" role="group" aria-label={t('approval.decision', { name: request.name })}>
              {allowed.includes('approve') && (
                <button type="button" aria-pressed={chosen?.decision === 'approve'} disabled={done} onClick={() => choose(request, 'approve')}>
                  {t('approval.approve')}
                </button>
              )}
              {allowed.includes('reject') && (
                <button type="button" class="danger" aria-pressed={chosen?.decision === 'reject'} disabled={done} onClick={() => choose(request, 'reject')}>
                  {t('approval.reject')}
                </button>
              )}
              {allowed.includes('edit') && (
                <button type="button" aria-pressed={chosen?.decision === 'edit'} disabled={done} onClick={() => choose(request, 'edit')}>
                  {t('approval.edit')}
                </button>
              )}
            </div>
            {chosen?.decision === 'edit' && (
              <>
                <label for={`${item.key}-${request.tool_call_id}-args`}>{t('approval.editArguments', { name: request.name })}</label>
                <textarea
                  id={`${item.key}-${request.tool_call_id}-args`}
                  rows={5}
                  disabled={done}
                  value={chosen.arguments}
                  onInput={(e) => {
                    const value = e.currentTarget.value;
                    setDecisions((prev) => ({ ...prev, [request.tool_call_id]: { decision: 'edit', arguments: value } }));
                  }}
                />
              </>
            )}
          </div>
        );
      })}
      <label for={`${item.key}-message`}>{t('approval.message')}</label>
      <input id={`${item.key}-message`} value={message} disabled={done} onInput={(e) => setMessage(e.currentTarget.value)} />
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="actions">
        <button type="submit" disabled={done || busy || !allChosen}>
          {t('approval.submit')}
        </button>
        <span role="status">{done ? t('approval.sent') : ''}</span>
      </div>
    </form>
  );
}

/** A transcript's items; `onOpenChild` opens the subagent a tool call started. */
export function TranscriptView({ items, onOpenChild }: { items: Item[]; onOpenChild?: (runId: string) => void }) {
  return (
    <ol class="transcript">
      {items.map((item) => {
        switch (item.kind) {
          case 'user':
            return (
              <li class="msg user" key={item.key}>
                <span class="who">{t('chat.you')}</span>
                <div class="text">{item.text}</div>
              </li>
            );
          case 'assistant':
            return (
              <li class="msg assistant" key={item.key}>
                <span class="who">{t('chat.assistant')}</span>
                <MarkdownText text={item.text} />
              </li>
            );
          case 'tool':
            return (
              <li class={`msg tool${item.isError ? ' is-error' : ''}`} key={item.key} data-tool={item.name}>
                <details>
                  <summary>
                    {t('chat.toolCall', { name: item.name })}
                    {item.result === undefined ? ' …' : item.isError ? ` (${t('chat.toolError')})` : ' ✓'}
                  </summary>
                  {item.args !== undefined && (
                    <>
                      <h4>{t('chat.arguments')}</h4>
                      <Folded text={pretty(item.args)} />
                    </>
                  )}
                  {item.result !== undefined && (
                    <>
                      <h4>{t('chat.toolResult')}</h4>
                      <Folded text={pretty(item.result)} />
                    </>
                  )}
                </details>
                {item.childRunId && onOpenChild && (
                  <button type="button" class="link-button" onClick={() => onOpenChild(item.childRunId!)}>
                    {t('panel.open', { slug: childSlug(item.result) ?? item.childRunId.slice(0, 8) })}
                  </button>
                )}
              </li>
            );
          case 'decided':
            return (
              <li class="msg decided" key={item.key} data-run={item.runId}>
                <span class="who">{t('approval.record')}</span>
                <ul class="plain">
                  {item.records.map((record) => (
                    <li class={`decision-${record.decision}`}>
                      {t('approval.decided', { name: record.name, decision: t(`approval.did.${record.decision}` as Key), uid: record.decided_by })}
                    </li>
                  ))}
                </ul>
              </li>
            );
          case 'end':
            return (
              <li class={`msg end status-${item.status}`} key={item.key} data-run={item.runId}>
                <a href={`#/runs/${encodeURIComponent(item.runId)}`}>
                  {t('chat.runStatus', { id: item.runId.slice(0, 8), status: statusText(item.status) })}
                </a>
                {item.error ? ` — ${item.error}` : ''}
                {item.reason ? ` (${item.reason})` : ''}
                {(item.durationMs != null || item.tokens) && (
                  <span class="muted small run-cost">
                    {[
                      item.durationMs != null ? formatDuration(item.durationMs) : null,
                      item.tokens ? t('timeline.tokens', { input: item.tokens.input, output: item.tokens.output }) : null,
                    ]
                      .filter(Boolean)
                      .map((part) => ` · ${part}`)
                      .join('')}
                  </span>
                )}
              </li>
            );
          case 'approval':
            return (
              <li class="msg approval-item" key={item.key}>
                <ApprovalCard item={item} />
              </li>
            );
        }
      })}
    </ol>
  );
}
