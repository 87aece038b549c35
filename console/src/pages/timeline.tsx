// A run's timeline (#/runs/<run_id>): the run and every run under it as a waterfall, from
// `GET /api/agent/runs/{run_id}/trace`. One table row per span in tree order (a run, its model and tool
// calls, each child run under the tool call that started it), indented by its depth; a bar placed and
// sized by when it started and how long it took, relative to the root run's start and the whole tree's
// length (a span still going on reaches to now). While the root run goes on, the page asks again every 2 s.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, runTrace, type RunTrace, type TraceSpan } from '../api';
import { statusText, t, type Key } from '../i18n';
import { RunFacts } from './run-facts';
import { formatDuration, instant } from '../time';

/** How often the timeline of a run that goes on is read again. */
const REFRESH_MS = 2000;

/** Statuses shown as errors. */
const ERRORS = new Set(['error', 'failed']);

/** A span placed on the timeline. */
interface Row {
  span: TraceSpan;
  depth: number;
  /** From the timeline's start, in milliseconds. */
  offset: number;
  /** How long it took, or has taken so far. */
  duration: number;
  running: boolean;
}

/**
 * The spans in the order a waterfall reads, each with its depth: a span, then the spans under it, each
 * child run right under the tool call that started it (the answer lists a run's calls before its
 * children's runs). A span whose parent is not in the answer starts a tree of its own.
 */
export function treeOrder(spans: TraceSpan[]): { span: TraceSpan; depth: number }[] {
  const ids = new Set(spans.map((s) => s.span_id));
  const under = new Map<string | null, TraceSpan[]>();
  for (const span of spans) {
    const parent = span.parent_span_id !== null && ids.has(span.parent_span_id) && span.parent_span_id !== span.span_id ? span.parent_span_id : null;
    const siblings = under.get(parent);
    if (siblings) siblings.push(span);
    else under.set(parent, [span]);
  }
  const out: { span: TraceSpan; depth: number }[] = [];
  const seen = new Set<string>();
  const walk = (span: TraceSpan, depth: number) => {
    if (seen.has(span.span_id)) return;
    seen.add(span.span_id);
    out.push({ span, depth });
    for (const child of under.get(span.span_id) ?? []) walk(child, depth + 1);
  };
  for (const top of under.get(null) ?? []) walk(top, 0);
  // A cycle's spans (a malformed answer) are still shown.
  for (const span of spans) walk(span, 0);
  return out;
}

/** The rows of the spans and the timeline's length, with `now` the end of the spans that go on. */
export function layout(spans: TraceSpan[], rootId: string, now: number): { rows: Row[]; total: number } {
  const root = spans.find((s) => s.span_id === rootId) ?? spans[0];
  const starts = spans.map((s) => instant(s.start)).filter((v): v is number => v !== null);
  const origin = Math.min(instant(root?.start) ?? now, ...starts);
  let last = origin;
  const rows = treeOrder(spans).map(({ span, depth }) => {
    const start = instant(span.start) ?? origin;
    const end = instant(span.end);
    const running = span.end === null;
    const duration = span.duration_ms ?? Math.max(0, (end ?? Math.max(now, start)) - start);
    last = Math.max(last, start + duration);
    return { span, depth, offset: start - origin, duration, running };
  });
  return { rows, total: Math.max(1, last - origin) };
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** What a row says of its span beyond its time: tokens and cost of a model call, the result's size of a tool call. */
function details(span: TraceSpan): string[] {
  const a = span.attributes ?? {};
  const out: string[] = [];
  if (span.kind === 'chat' || span.kind === 'run') {
    const input = num(a['gen_ai.usage.input_tokens']);
    const output = num(a['gen_ai.usage.output_tokens']);
    if (input !== null || output !== null) out.push(t('timeline.tokens', { input: input ?? 0, output: output ?? 0 }));
  }
  if (span.kind === 'chat') {
    const cached = num(a['gen_ai.usage.cache_read.input_tokens']);
    if (cached) out.push(t('timeline.cached', { cached }));
    if (typeof a['yuxi.cost'] === 'string' && a['yuxi.cost']) out.push(t('timeline.cost', { cost: a['yuxi.cost'] as string }));
    const ttft = num(a['yuxi.time_to_first_token_ms']);
    if (ttft !== null) out.push(t('timeline.ttft', { duration: formatDuration(ttft) }));
  }
  if (span.kind === 'tool') {
    const bytes = num(a['yuxi.tool.result_bytes']);
    if (bytes !== null) out.push(t('timeline.bytes', { bytes }));
  }
  return out;
}

/** A span's status in words, marked ✕ when it is an error (not by its colour alone). */
function StatusBadge({ status }: { status: string }) {
  return (
    <span class={`badge status status-${status}`}>
      {ERRORS.has(status) ? '✕ ' : ''}
      {statusText(status)}
    </span>
  );
}

function kindText(kind: string): string {
  const key = `timeline.kind.${kind}` as Key;
  return kind === 'run' || kind === 'chat' || kind === 'tool' ? t(key) : kind;
}

export function TimelinePage({ runId }: { runId: string }) {
  const [trace, setTrace] = useState<RunTrace | null>(null);
  const [now, setNow] = useState(Date.now());
  const [missing, setMissing] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    let ended = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const answer = await runTrace(runId);
        if (stopped) return;
        const root = answer.spans.find((s) => s.span_id === answer.run_id) ?? answer.spans[0];
        ended = !root || root.end !== null;
        setTrace(answer);
        setNow(Date.now());
        setError(null);
      } catch (err) {
        if (stopped) return;
        if (err instanceof ApiError && err.status === 404) {
          setMissing(true);
          return;
        }
        setError((err as Error).message);
      }
      if (!ended && !stopped) timer = setTimeout(load, REFRESH_MS);
    };
    load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [runId]);

  const short = runId.slice(0, 8);
  const head = (
    <>
      <div class="page-head">
        <h1 id="timeline-heading">{t('timeline.heading')}</h1>
        {trace?.trace_url && (
          <div class="actions">
            <a class="button" href={trace.trace_url} target="_blank" rel="noopener noreferrer">
              {t('timeline.viewTrace')}
              <span class="visually-hidden"> {t('timeline.newTab')}</span>
            </a>
          </div>
        )}
      </div>
      <p class="muted small mono">{runId}</p>
    </>
  );

  if (missing) {
    return (
      <section class="timeline-page" aria-labelledby="timeline-heading">
        {head}
        <p class="error" role="alert">
          {t('timeline.notFound', { id: runId })}
        </p>
      </section>
    );
  }

  const spans = trace?.spans ?? [];
  const root = spans.find((s) => s.span_id === trace?.run_id) ?? spans[0];
  const { rows, total } = layout(spans, trace?.run_id ?? runId, now);
  const going = root !== undefined && root.end === null;
  const count = (kind: string) => spans.filter((s) => s.kind === kind).length;
  const agent = root?.attributes?.['gen_ai.agent.name'];

  return (
    <section class="timeline-page" aria-labelledby="timeline-heading">
      {head}
      {!trace && !error && <p class="muted">{t('common.loading')}</p>}
      {root && (
        <p class="timeline-summary" role="status">
          <StatusBadge status={root.status} />{' '}
          {t('timeline.summary', {
            agent: typeof agent === 'string' ? agent : short,
            duration: formatDuration(total),
            runs: count('run'),
            chats: count('chat'),
            tools: count('tool'),
          })}{' '}
          {going ? t('timeline.refreshing') : ''}
        </p>
      )}
      <RunFacts
        runId={runId}
        ended={!going && root !== undefined}
        children={spans
          .filter((s) => s.kind === 'run' && s.run_id !== (trace?.run_id ?? runId))
          .map((s) => ({ run_id: s.run_id, name: typeof s.attributes?.['gen_ai.agent.name'] === 'string' ? (s.attributes['gen_ai.agent.name'] as string) : s.name }))}
      />
      <h2 class="timeline-title">{t('run.timeline')}</h2>
      {trace?.truncated && <p class="notice">{t('timeline.truncated')}</p>}
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      {rows.length > 0 && (
        <div class="table-wrap">
          <table class="timeline" data-ended={going ? 'false' : 'true'}>
            <caption class="visually-hidden">{t('timeline.caption', { id: short })}</caption>
            <thead>
              <tr>
                <th scope="col">{t('timeline.span')}</th>
                <th scope="col">{t('timeline.duration')}</th>
                <th scope="col">{t('timeline.status')}</th>
                <th scope="col">{t('timeline.details')}</th>
                <th scope="col" class="timeline-scale">
                  <span>{t('timeline.when')}</span>
                  <span class="timeline-ticks" aria-hidden="true">
                    <span>0</span>
                    <span>{formatDuration(total)}</span>
                  </span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map(({ span, depth, offset, duration, running }) => {
                const failed = ERRORS.has(span.status);
                const kind = ['run', 'chat', 'tool'].includes(span.kind) ? span.kind : 'other';
                // At least a sliver, kept within the track.
                const width = Math.min(100, Math.max(0.4, (duration / total) * 100));
                const left = Math.max(0, Math.min(100 - width, (offset / total) * 100));
                const shownDuration = running ? t('timeline.soFar', { duration: formatDuration(duration) }) : formatDuration(duration);
                return (
                  <tr
                    key={span.span_id}
                    data-span-id={span.span_id}
                    data-kind={span.kind}
                    data-depth={depth}
                    class={`timeline-row kind-${kind} status-${span.status}${failed ? ' timeline-error' : ''}`}
                  >
                    <th scope="row" class="timeline-name">
                      <span class="timeline-indent" style={{ paddingInlineStart: `${depth * 1.1}rem` }}>
                        <span class={`kind-tag kind-${kind}`}>{kindText(span.kind)}</span>{' '}
                        <span class="span-name">{span.name}</span>
                        <span class="visually-hidden"> {t('timeline.level', { level: depth + 1 })}</span>
                      </span>
                    </th>
                    <td class="timeline-duration">{shownDuration}</td>
                    <td>
                      <StatusBadge status={span.status} />
                    </td>
                    <td class="timeline-details small">{details(span).join(' · ')}</td>
                    <td class="timeline-cell">
                      <div class="timeline-track">
                        <span
                          class={`timeline-bar timeline-${kind}${failed ? ' timeline-error' : ''}${running ? ' timeline-running' : ''}`}
                          style={{ left: `${left}%`, width: `${width}%` }}
                          title={t('timeline.at', { from: formatDuration(offset), to: formatDuration(offset + duration) })}
                        />
                      </div>
                      <span class="visually-hidden">{t('timeline.at', { from: formatDuration(offset), to: formatDuration(offset + duration) })}</span>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
