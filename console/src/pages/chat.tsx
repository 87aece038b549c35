// Chat and runs: a main agent's conversations. Sending starts a run on the thread (`POST /api/agent/runs`)
// and follows its whole run tree in one stream (`GET /api/agent/runs/{id}/events?tree=true`, flat
// payloads): the root's events make the transcript, its descendants' the subagent panel. A run can be
// cancelled; sending again continues the thread. Opening a conversation reads its persisted messages,
// finds the subagent runs its tool results name, and replays their trees into the panel. The latest run of
// the conversation links to its timeline (#/runs/<run_id>).
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, followEvents, modelChoices, type ModelChoice } from '../api';
import { statusText, t } from '../i18n';
import { applyEvent, fromConversation, TERMINAL, withDecisions, type Envelope, type Item, type RunInfo } from '../transcript';
import { FilesPanel } from './files';
import { TranscriptView } from './transcript-view';
import { ChildDialog, SubagentPanel, TimelineLink, type RunNode } from './subagents';
import type { Agent } from './agents';

interface Conversation {
  thread_id: string;
  title: string | null;
  agent_id: string;
  updated_at: string | null;
  thread_status?: string;
  last_run_status?: string | null;
}

/**
 * The runs a user started in the conversation, newest first (`GET /api/agent/runs?thread_id=…`), each
 * ended one with why it ended and the tokens it used (its result's, for the 20 newest).
 */
async function conversationRuns(threadId: string): Promise<RunInfo[]> {
  const { runs } = await api<{ runs: RunInfo[] }>('GET', `/api/agent/runs?thread_id=${encodeURIComponent(threadId)}&run_type=chat&limit=100`);
  await Promise.all(
    runs.slice(0, 20).map(async (run) => {
      if (!TERMINAL.has(run.status)) return;
      try {
        const result = await api<{ reason?: string; token_usage?: { prompt_tokens: number; completion_tokens: number } }>(
          'GET',
          `/api/agent/runs/${encodeURIComponent(run.run_id)}/result`,
        );
        run.reason = result.reason ?? null;
        if (result.token_usage) run.tokens = { input: result.token_usage.prompt_tokens, output: result.token_usage.completion_tokens };
      } catch {
        // A result no longer kept: the run's end is said without a reason.
      }
    }),
  );
  return runs;
}

interface Live {
  runId: string;
  status: string;
}

export function ChatPage({ threadId }: { threadId: string | null }) {
  const [agents, setAgents] = useState<Agent[]>([]);
  const [agentSlug, setAgentSlug] = useState('');
  const [threads, setThreads] = useState<Conversation[]>([]);
  const [items, setItems] = useState<Item[]>([]);
  // Whether the transcript is the conversation as the facade keeps it (no run of it goes on).
  const [settled, setSettled] = useState(false);
  const [nodes, setNodes] = useState<Record<string, RunNode>>({});
  const [roots, setRoots] = useState<string[]>([]);
  const [live, setLive] = useState<Live | null>(null);
  const [latestRun, setLatestRun] = useState<string | null>(null);
  const [query, setQuery] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [opened, setOpened] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [models, setModels] = useState<ModelChoice[]>([]);
  const [model, setModel] = useState('');
  const loaded = useRef<string | null>(null);
  const streams = useRef(new Map<string, AbortController>());
  const composer = useRef<HTMLTextAreaElement>(null);
  const box = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  // When the reader last scrolled, wheeled, touched or pressed a key in the transcript (ms since the epoch).
  const reading = useRef(0);

  const refreshThreads = () =>
    api<{ threads?: Conversation[] } | Conversation[]>('GET', '/api/chat/threads?limit=50')
      .then((answer) => setThreads(Array.isArray(answer) ? answer : (answer.threads ?? [])))
      .catch(() => undefined);

  useEffect(() => {
    // The Models the user may run on; the agent's own model is the default choice.
    modelChoices()
      .then((choices) => setModels(choices.filter((c) => c.resource)))
      .catch(() => setModels([]));
  }, []);

  useEffect(() => {
    api<{ agents: Agent[] }>('GET', '/api/agent')
      .then(({ agents }) => {
        setAgents(agents);
        setAgentSlug((current) => current || (agents.find((a) => a.is_default) ?? agents[0])?.slug || '');
      })
      .catch((err) => setError(err.message));
    refreshThreads();
    return () => streams.current.forEach((c) => c.abort());
  }, []);

  // A run that ended changes its conversation's line in the list.
  useEffect(() => {
    if (live && TERMINAL.has(live.status)) refreshThreads();
  }, [live?.runId, live?.status]);

  /** Reads the conversation `thread` as the facade keeps it into the transcript, if it is still shown. */
  const rebuild = async (thread: string | null | undefined) => {
    if (!thread) return;
    try {
      const [answer, runs] = await Promise.all([
        api<{ messages: any[] }>('GET', `/api/threads/${encodeURIComponent(thread)}/messages`),
        conversationRuns(thread),
      ]);
      if (loaded.current !== thread) return;
      setItems(fromConversation(answer.messages, runs));
      setSettled(true);
    } catch {
      // Unreadable now: the transcript stays as it was streamed.
    }
  };

  /** Follows the run tree of `rootId`: its own events into the transcript when `transcript`. */
  const followTree = (rootId: string, transcript: boolean) => {
    if (streams.current.has(rootId)) return;
    const controller = new AbortController();
    streams.current.set(rootId, controller);
    setRoots((prev) => (prev.includes(rootId) ? prev : [...prev, rootId]));
    let rootEnded = false;
    followEvents(
      `/api/agent/runs/${encodeURIComponent(rootId)}/events?tree=true&event_format=flat`,
      (sse) => {
        let envelope: Envelope;
        try {
          envelope = JSON.parse(sse.data);
        } catch {
          return;
        }
        const runId = envelope.run_id ?? rootId;
        if (runId === rootId) {
          if (envelope.event === 'end') rootEnded = true;
          if (transcript) {
            setItems((prev) => applyEvent(prev, envelope));
            // Ended, the conversation is read as the facade keeps it: the same transcript a reopened
            // conversation shows (what the run said after the last event it streamed included).
            if (envelope.event === 'end') rebuild(envelope.thread_id ?? loaded.current);
            setLive((prev) => {
              if (!prev || prev.runId !== rootId) return prev;
              if (envelope.event === 'end') return { runId: rootId, status: envelope.payload?.status ?? 'completed' };
              if (envelope.event === 'interrupt') return { runId: rootId, status: 'waiting' };
              return prev.status === 'pending' || prev.status === 'waiting' ? { runId: rootId, status: 'running' } : prev;
            });
          }
        } else {
          setNodes((prev) => {
            const node = prev[runId] ?? {
              runId,
              rootRunId: rootId,
              parentRunId: envelope.parent_run_id ?? rootId,
              status: 'pending',
              items: [],
            };
            const updated: RunNode = {
              ...node,
              parentRunId: envelope.parent_run_id ?? node.parentRunId,
              threadId: node.threadId ?? envelope.thread_id,
              slug: node.slug ?? (envelope.event === 'metadata' ? envelope.payload?.agent_slug : undefined),
              task: node.task ?? (envelope.event === 'metadata' && typeof envelope.payload?.input === 'string' ? envelope.payload.input : undefined),
              items: applyEvent(node.items, envelope),
              status:
                envelope.event === 'end'
                  ? (envelope.payload?.status ?? 'completed')
                  : envelope.event === 'interrupt'
                    ? 'waiting'
                    : TERMINAL.has(node.status)
                      ? node.status
                      : 'running',
            };
            return { ...prev, [runId]: updated };
          });
        }
        // A child started: known before its own first event.
        if (envelope.event === 'custom' && envelope.payload?.type === 'subagent_run') {
          const p = envelope.payload;
          setNodes((prev) => {
            const node = prev[p.run_id];
            const base: RunNode = node ?? { runId: p.run_id, rootRunId: rootId, status: 'pending', items: [] };
            return {
              ...prev,
              [p.run_id]: {
                ...base,
                parentRunId: base.parentRunId ?? runId,
                threadId: base.threadId ?? p.thread_id,
                slug: p.subagent_slug ?? base.slug,
              },
            };
          });
        }
      },
      {
        signal: controller.signal,
        done: () => rootEnded,
        onError: (err) => setError(err.message),
      },
    ).finally(() => streams.current.delete(rootId));
  };

  // Opening a conversation (or a fresh page): its messages, its subagents' trees, its unfinished run.
  useEffect(() => {
    if (threadId === loaded.current) return;
    streams.current.forEach((c) => c.abort());
    streams.current.clear();
    loaded.current = threadId;
    setItems([]);
    setSettled(false);
    // A conversation opens at its end.
    pinned.current = true;
    setNodes({});
    setRoots([]);
    setLive(null);
    setLatestRun(null);
    setError(null);
    setOpened(null);
    if (!threadId) return;
    (async () => {
      try {
        const [answer, runs] = await Promise.all([
          api<{ messages: any[] }>('GET', `/api/threads/${encodeURIComponent(threadId)}/messages`),
          conversationRuns(threadId),
        ]);
        if (loaded.current !== threadId) return;
        const history = fromConversation(answer.messages, runs);
        setItems(history);
        const newest = runs[0];
        if (newest) setLatestRun(newest.run_id);
        // The runs of this thread that started subagents: named by the subagent tools' results
        // (`created_by_run_id`), else by the child run's record.
        const parents = new Set<string>();
        const unknown = new Set<string>();
        for (const item of history) {
          if (item.kind !== 'tool' || !item.childRunId) continue;
          let parent: unknown;
          try {
            parent = JSON.parse(item.result ?? '').created_by_run_id;
          } catch {
            parent = undefined;
          }
          if (typeof parent === 'string') parents.add(parent);
          else unknown.add(item.childRunId);
        }
        await Promise.all(
          [...unknown].map(async (child) => {
            try {
              const { run } = await api('GET', `/api/agent/runs/${encodeURIComponent(child)}`);
              const parent = run?.created_by_run_id ?? run?.parent?.runId;
              if (parent) parents.add(parent);
            } catch {
              // A child run the store no longer keeps: nothing to show.
            }
          }),
        );
        const active = await api<{ run: { run_id: string; status: string } | null }>(
          'GET',
          `/api/agent/thread/${encodeURIComponent(threadId)}/active_run`,
        );
        if (loaded.current !== threadId) return;
        for (const parent of parents) if (parent !== active.run?.run_id) followTree(parent, false);
        if (active.run && !TERMINAL.has(active.run.status)) {
          setLive({ runId: active.run.run_id, status: active.run.status });
          followTree(active.run.run_id, true);
        } else {
          if (active.run) setLatestRun(active.run.run_id);
          setSettled(true);
        }
      } catch (err) {
        setError((err as Error).message);
      }
    })();
  }, [threadId]);

  useEffect(() => {
    const conversation = threads.find((c) => c.thread_id === threadId);
    if (conversation) setAgentSlug(conversation.agent_id);
  }, [threads, threadId]);

  // An approval answered (here or elsewhere) becomes the decisions the run keeps, as a reopened
  // conversation shows them; one with none (it expired) goes.
  const asked = useRef(new Set<string>());
  useEffect(() => {
    for (const item of items) {
      if (item.kind !== 'approval' || !item.answered || asked.current.has(item.key)) continue;
      asked.current.add(item.key);
      const runId = item.runId;
      api<{ run: RunInfo }>('GET', `/api/agent/runs/${encodeURIComponent(runId)}`)
        .then(({ run }) => setItems((prev) => withDecisions(prev, runId, run.approvals ?? [])))
        .catch(() => undefined);
    }
  }, [items]);

  // The transcript follows what arrives while the reader is at its end: the box scrolls to its end, and
  // where the box grows with the page (a phone), the page scrolls to the box's end.
  useLayoutEffect(() => {
    const el = box.current;
    if (!pinned.current || !el) return;
    el.scrollTop = el.scrollHeight;
    const last = el.querySelector('.transcript > li:last-child');
    if (last && el.scrollHeight <= el.clientHeight + 1) last.scrollIntoView({ block: 'nearest' });
  }, [items]);

  const running = live !== null && !TERMINAL.has(live.status);

  const send = async (e: Event) => {
    e.preventDefault();
    const text = query.trim();
    if (!text || !agentSlug || running) return;
    setBusy(true);
    setError(null);
    try {
      const body: Record<string, unknown> = { query: text, agent_slug: agentSlug };
      if (threadId) body.thread_id = threadId;
      if (model) body.model_spec = model;
      const answer = await api<{ run_id: string; thread_id: string }>('POST', '/api/agent/runs', body);
      setQuery('');
      setItems((prev) => [...prev, { kind: 'user', key: `u-${answer.run_id}`, text }]);
      setSettled(false);
      // Who asks reads the answer: the view follows it again.
      pinned.current = true;
      setLive({ runId: answer.run_id, status: 'pending' });
      setLatestRun(answer.run_id);
      if (!threadId) {
        loaded.current = answer.thread_id;
        location.hash = `#/chat/${encodeURIComponent(answer.thread_id)}`;
      }
      followTree(answer.run_id, true);
      refreshThreads();
    } catch (err) {
      const error = err as ApiError;
      setError(error.code === 'run_busy' ? t('chat.busy', { status: error.message }) : error.message);
    } finally {
      setBusy(false);
    }
  };

  const cancel = async () => {
    if (!live) return;
    try {
      const answer = await api<{ status: string }>('POST', `/api/agent/runs/${encodeURIComponent(live.runId)}/cancel`);
      setLive((prev) => (prev && !TERMINAL.has(prev.status) ? { ...prev, status: answer.status } : prev));
    } catch (err) {
      setError((err as Error).message);
    }
  };

  const mainAgents = agents.filter((a) => !a.is_subagent);
  return (
    <section class="chat" aria-labelledby="chat-heading">
      <h1 id="chat-heading" class="visually-hidden">
        {t('chat.heading')}
      </h1>
      <aside class="threads" aria-labelledby="threads-heading">
        <h2 id="threads-heading">{t('chat.threads')}</h2>
        <a class="button" href="#/chat" onClick={() => composer.current?.focus()}>
          {t('chat.newThread')}
        </a>
        {threads.length === 0 ? (
          <p class="muted">{t('chat.noThreads')}</p>
        ) : (
          <ul>
            {threads.map((c) => (
              <li>
                <a
                  class="thread-title"
                  href={`#/chat/${encodeURIComponent(c.thread_id)}`}
                  title={c.title || c.thread_id}
                  aria-current={c.thread_id === threadId ? 'page' : undefined}
                >
                  {c.title || c.thread_id}
                </a>
                <span class="thread-meta muted small">
                  <span class="agent">{c.agent_id}</span>
                  {c.updated_at && <time dateTime={c.updated_at}>{new Date(c.updated_at).toLocaleString()}</time>}
                  {c.last_run_status && <span class={`badge status-${c.last_run_status}`}>{statusText(c.last_run_status)}</span>}
                </span>
              </li>
            ))}
          </ul>
        )}
      </aside>
      <div class="conversation">
        <div class="conversation-head">
          <label for="chat-agent">{t('chat.agent')}</label>
          <select id="chat-agent" value={agentSlug} disabled={Boolean(threadId)} onChange={(e) => setAgentSlug(e.currentTarget.value)}>
            {mainAgents.map((a) => (
              <option value={a.slug}>{a.name}</option>
            ))}
          </select>
          {threadId && <span class="muted small">{t('chat.thread', { id: threadId })}</span>}
        </div>
        <div
          class="transcript-box"
          ref={box}
          role="log"
          data-settled={settled ? 'true' : 'false'}
          aria-live="polite"
          aria-label={t('chat.transcript')}
          tabIndex={0}
          onScroll={(e) => {
            const el = e.currentTarget;
            // Only the reader leaves the end: a scroll nobody asked for (the browser's, when the items are
            // replaced or a dialog opens) is undone while the view follows the run.
            if (el.scrollHeight - el.scrollTop - el.clientHeight < 40) pinned.current = true;
            else if (Date.now() - reading.current < 1000) pinned.current = false;
            else if (pinned.current) el.scrollTop = el.scrollHeight;
          }}
          onWheel={() => (reading.current = Date.now())}
          onTouchMove={() => (reading.current = Date.now())}
          onKeyDown={() => (reading.current = Date.now())}
          onPointerDown={() => (reading.current = Date.now())}
        >
          <TranscriptView items={items} onOpenChild={setOpened} />
        </div>
        {(live || latestRun) && (
          <div class="run-line">
            {live && (
              <p class={`run-status status-${live.status}`} role="status">
                {t('chat.runStatus', { id: live.runId.slice(0, 8), status: statusText(live.status) })}
              </p>
            )}
            <TimelineLink runId={live?.runId ?? latestRun!} />
          </div>
        )}
        {error && (
          <p class="error" role="alert">
            {t('common.error', { message: error })}
          </p>
        )}
        <form class="composer" onSubmit={send}>
          <label for="chat-message">{threadId ? t('chat.continue') : t('chat.message')}</label>
          <textarea
            id="chat-message"
            ref={composer}
            rows={3}
            value={query}
            onInput={(e) => setQuery(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(e);
            }}
          />
          <div class="actions">
            {models.length > 0 && (
              <label class="model-choice">
                {t('chat.model')}{' '}
                <select id="chat-model" value={model} onChange={(e) => setModel(e.currentTarget.value)}>
                  <option value="">{t('chat.agentModel')}</option>
                  {models.map((m) => (
                    <option value={m.spec}>{m.label}</option>
                  ))}
                </select>
              </label>
            )}
            <button type="submit" disabled={busy || running || !query.trim() || !agentSlug}>
              {t('chat.send')}
            </button>
            {running && (
              <button type="button" class="danger" onClick={cancel}>
                {t('chat.cancelRun')}
              </button>
            )}
          </div>
        </form>
        {threadId && <FilesPanel threadId={threadId} refresh={`${live?.runId ?? latestRun ?? ''}:${live?.status ?? ''}`} />}
      </div>
      <SubagentPanel roots={roots} nodes={nodes} onOpen={setOpened} />
      {opened && <ChildDialog node={nodes[opened] ?? { runId: opened, rootRunId: '', status: 'unknown', items: [] }} onClose={() => setOpened(null)} />}
    </section>
  );
}
