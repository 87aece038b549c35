// What a run's page says beside its timeline: the run (agent, status, kind, when, what it was asked),
// where it belongs (its conversation, the run that delegated it, the runs it started), its result
// (the answer rendered as Markdown, tokens used, why it ended) and the files of its conversation.
// Read from `GET /api/agent/runs/{id}` and, once it has ended, `.../result`; read again while it goes on.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { statusText, t } from '../i18n';
import { TERMINAL } from '../transcript';
import { FilesPanel } from './files';
import type { RunRow } from './runs';
import { MarkdownText } from './transcript-view';

interface Result {
  status: string;
  output: string;
  error: string | null;
  reason?: string;
  token_usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  tree_token_usage?: { total_tokens: number };
}

/** The run's facts, result and files; `children` are the runs under it the timeline names. */
export function RunFacts({ runId, children, ended }: { runId: string; children: { run_id: string; name: string }[]; ended: boolean }) {
  const [run, setRun] = useState<RunRow | null>(null);
  const [result, setResult] = useState<Result | null>(null);

  useEffect(() => {
    let stopped = false;
    api<{ run: RunRow }>('GET', `/api/agent/runs/${encodeURIComponent(runId)}`)
      .then(({ run }) => {
        if (stopped) return;
        setRun(run);
        if (TERMINAL.has(run.status)) {
          api<Result>('GET', `/api/agent/runs/${encodeURIComponent(runId)}/result`)
            .then((answer) => !stopped && setResult(answer))
            .catch(() => undefined);
        }
      })
      .catch(() => undefined);
    return () => {
      stopped = true;
    };
    // The timeline says when the run ended; read it again then.
  }, [runId, ended]);

  if (!run) return null;
  // A subagent run works in its parent conversation's files.
  const filesThread = run.parent?.threadId ?? run.thread_id;
  return (
    <>
      <dl class="facts run-facts">
        <dt>{t('runs.status')}</dt>
        <dd>
          <span class={`badge status status-${run.status}`}>{statusText(run.status)}</span>
        </dd>
        <dt>{t('runs.agent')}</dt>
        <dd>{run.agent_slug}</dd>
        <dt>{t('runs.created')}</dt>
        <dd>
          <time dateTime={run.created_at}>{new Date(run.created_at).toLocaleString()}</time>
        </dd>
        {run.summary && (
          <>
            <dt>{t('run.asked')}</dt>
            <dd class="run-summary">{run.summary}</dd>
          </>
        )}
        <dt>{t('run.belongs')}</dt>
        <dd>
          {run.parent ? (
            <a href={`#/runs/${encodeURIComponent(run.parent.runId)}`}>{t('run.parent', { agent: run.parent.agent, id: run.parent.runId.slice(0, 8) })}</a>
          ) : (
            <a href={`#/chat/${encodeURIComponent(run.thread_id)}`}>{t('run.conversation')}</a>
          )}
        </dd>
        {children.length > 0 && (
          <>
            <dt>{t('run.children')}</dt>
            <dd>
              <ul class="plain run-children">
                {children.map((child) => (
                  <li>
                    <a href={`#/runs/${encodeURIComponent(child.run_id)}`}>
                      {child.name} ({child.run_id.slice(0, 8)})
                    </a>
                  </li>
                ))}
              </ul>
            </dd>
          </>
        )}
      </dl>
      {result && (
        <section class="run-result" aria-labelledby="run-result-heading">
          <h2 id="run-result-heading">{t('run.result')}</h2>
          <p class="muted small">
            {t('run.tokens', { input: result.token_usage.prompt_tokens, output: result.token_usage.completion_tokens })}
            {result.tree_token_usage && result.tree_token_usage.total_tokens !== result.token_usage.total_tokens
              ? ` · ${t('run.treeTokens', { total: result.tree_token_usage.total_tokens })}`
              : ''}
            {result.reason ? ` · ${result.reason}` : ''}
          </p>
          {result.error && <p class="error">{result.error}</p>}
          {result.output ? <MarkdownText text={result.output} /> : !result.error && <p class="muted">{t('run.noAnswer')}</p>}
        </section>
      )}
      <div class="run-files">
        <FilesPanel threadId={filesThread} refresh={`${runId}:${run.status}:${ended}`} />
      </div>
    </>
  );
}
