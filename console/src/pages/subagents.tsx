// The subagent panel: each run's children as a tree, grouped by the run that started the tree, each with
// its status and last progress lines. Opening a child shows it in a dialog: a running child's own event
// stream, followed live; a finished child's persisted messages (`GET /api/threads/{thread_id}/messages`).
// Each run links to its timeline (#/runs/<run_id>).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, followEvents } from '../api';
import { statusText, t } from '../i18n';
import { applyEvent, fromMessages, progressLines, TERMINAL, type Envelope, type Item } from '../transcript';
import { TranscriptView } from './transcript-view';

/** A run below a tree's root, as the panel knows it from the tree's events. */
export interface RunNode {
  runId: string;
  rootRunId: string;
  parentRunId?: string;
  threadId?: string;
  slug?: string;
  /** The task it was given (its `metadata` event's input). */
  task?: string;
  status: string;
  items: Item[];
}

/** A link to a run's timeline page; `name` (a subagent) tells it from the others, else the run's id does. */
export function TimelineLink({ runId, name }: { runId: string; name?: string }) {
  return (
    <a
      class="timeline-link"
      href={`#/runs/${encodeURIComponent(runId)}`}
      aria-label={name ? t('timeline.linkOf', { name }) : t('timeline.linkOfRun', { id: runId.slice(0, 8) })}
    >
      {t('timeline.link')}
    </a>
  );
}

function NodeList({ parent, nodes, onOpen }: { parent: string; nodes: RunNode[]; onOpen: (runId: string) => void }) {
  const children = nodes.filter((n) => n.parentRunId === parent);
  if (children.length === 0) return null;
  return (
    <ul class="run-tree">
      {children.map((node) => {
        const progress = progressLines(node.items);
        const lines = progress.length > 0 ? progress : node.task ? [node.task.length > 160 ? `${node.task.slice(0, 157)}…` : node.task] : [];
        const name = node.slug ?? node.runId.slice(0, 8);
        return (
          <li class={`run-node status-${node.status}`} data-run={node.runId} data-slug={node.slug ?? ''}>
            <div class="node-head">
              <button type="button" class="link-button" onClick={() => onOpen(node.runId)} aria-label={t('panel.open', { slug: name })}>
                {name}
              </button>
              <span class={`badge status status-${node.status}`}>{statusText(node.status)}</span>
            </div>
            <div class="muted small">
              <span class="mono">{node.runId}</span> <TimelineLink runId={node.runId} name={name} />
            </div>
            {lines.length > 0 && (
              <ul class="progress">
                {lines.map((line) => (
                  <li>{line}</li>
                ))}
              </ul>
            )}
            <NodeList parent={node.runId} nodes={nodes} onOpen={onOpen} />
          </li>
        );
      })}
    </ul>
  );
}

export function SubagentPanel({
  roots,
  nodes,
  onOpen,
}: {
  roots: string[];
  nodes: Record<string, RunNode>;
  onOpen: (runId: string) => void;
}) {
  const all = Object.values(nodes);
  const groups = roots.filter((root) => all.some((n) => n.rootRunId === root));
  return (
    <aside class="subagents" aria-labelledby="panel-heading">
      <h2 id="panel-heading">{t('panel.heading')}</h2>
      {groups.length === 0 && <p class="muted">{t('panel.empty')}</p>}
      {groups.map((root) => (
        <section class="run-group" data-root={root} aria-label={t('panel.run', { id: root })}>
          <div class="node-head">
            <h3>{t('panel.run', { id: root.slice(0, 8) })}</h3>
            <TimelineLink runId={root} />
          </div>
          <NodeList parent={root} nodes={all.filter((n) => n.rootRunId === root)} onOpen={onOpen} />
        </section>
      ))}
    </aside>
  );
}

/** A child run in a modal dialog: live while it runs, from its thread's messages once it has ended. */
export function ChildDialog({ node, onClose }: { node: RunNode; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [items, setItems] = useState<Item[]>([]);
  const [mode, setMode] = useState<'live' | 'history' | null>(null);
  const [status, setStatus] = useState(node.status);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    dialog.current?.showModal();
    const controller = new AbortController();
    (async () => {
      let threadId = node.threadId;
      let current = node.status;
      if (!threadId || !TERMINAL.has(current)) {
        try {
          const { run } = await api('GET', `/api/agent/runs/${encodeURIComponent(node.runId)}`);
          threadId = threadId ?? run.thread_id;
          current = run.status;
          setStatus(current);
        } catch (err) {
          setError((err as Error).message);
          return;
        }
      }
      if (!TERMINAL.has(current)) {
        setMode('live');
        let ended = false;
        await followEvents(
          `/api/agent/runs/${encodeURIComponent(node.runId)}/events?event_format=flat`,
          (sse) => {
            let envelope: Envelope;
            try {
              envelope = JSON.parse(sse.data);
            } catch {
              return;
            }
            if (envelope.event === 'end') {
              ended = true;
              setStatus(envelope.payload?.status ?? 'completed');
            }
            setItems((prev) => applyEvent(prev, envelope));
          },
          { signal: controller.signal, done: () => ended, onError: (err) => setError(err.message) },
        );
      } else {
        setMode('history');
        try {
          const answer = await api<{ messages: any[] }>('GET', `/api/threads/${encodeURIComponent(threadId!)}/messages`);
          setItems(fromMessages(answer.messages, node.runId));
        } catch (err) {
          setError((err as Error).message);
        }
      }
    })();
    return () => {
      controller.abort();
      opener?.focus();
    };
  }, [node.runId]);

  const name = node.slug ?? node.runId.slice(0, 8);
  return (
    <dialog ref={dialog} class="child-dialog" aria-labelledby="child-heading" onClose={onClose} data-mode={mode ?? ''}>
      <div class="dialog-head">
        <h2 id="child-heading">{t('panel.dialog', { slug: name })}</h2>
        <button type="button" onClick={() => dialog.current?.close()} aria-label={t('common.close')}>
          ×
        </button>
      </div>
      <p class="muted small mono">{node.runId}</p>
      <p role="status" class={`status-${status}`}>
        {statusText(status)} — {mode === 'live' ? t('panel.live') : mode === 'history' ? t('panel.history') : t('common.loading')}
      </p>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      <div class="dialog-body">
        {mode && items.length === 0 && !error ? <p class="muted">{t('panel.noMessages')}</p> : <TranscriptView items={items} />}
      </div>
    </dialog>
  );
}
