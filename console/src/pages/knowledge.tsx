// Knowledge bases (`/api/knowledge`): the list with each one's indexing status; one base's documents, an
// upload (when it takes uploads and the user manages it) and a search box; a new base taking uploads.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { t } from '../i18n';

interface Status {
  ready: boolean;
  documents: number;
  chunks: number;
  indexed_at: string | null;
  error: string | null;
}

interface Base {
  slug: string;
  name: string;
  description: string | null;
  takes_uploads: boolean;
  permission: 'read' | 'manage';
  status: Status;
}

interface Result {
  knowledge_base: string;
  document: string;
  location: string;
  text: string;
  score: number;
}

function StatusText({ status }: { status: Status }) {
  return (
    <span class={`kb-status ${status.ready ? 'ok' : 'bad'}`}>
      {status.ready ? t('kb.ready') : t('kb.notReady')} · {t('kb.documents', { documents: status.documents, chunks: status.chunks })}
      {status.indexed_at && ` · ${t('kb.indexedAt', { time: new Date(status.indexed_at).toLocaleString() })}`}
      {status.error && <span class="error"> · {status.error}</span>}
    </span>
  );
}

function BaseDetail({ slug, onChanged }: { slug: string; onChanged: () => void }) {
  const [base, setBase] = useState<Base | null>(null);
  const [documents, setDocuments] = useState<{ name: string; chunks: number }[]>([]);
  const [file, setFile] = useState<File | null>(null);
  const [query, setQuery] = useState('');
  const [results, setResults] = useState<Result[] | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [uploadError, setUploadError] = useState<string | null>(null);

  const load = async () => {
    try {
      const [one, docs] = await Promise.all([
        api<{ knowledge_base: Base }>('GET', `/api/knowledge/${encodeURIComponent(slug)}`),
        api<{ documents: { name: string; chunks: number }[] }>('GET', `/api/knowledge/${encodeURIComponent(slug)}/documents`),
      ]);
      setBase(one.knowledge_base);
      setDocuments(docs.documents);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  useEffect(() => {
    load();
  }, [slug]);

  const upload = async (e: Event) => {
    e.preventDefault();
    if (!file) return;
    setUploadError(null);
    setMessage(null);
    const form = new FormData();
    form.append('file', file);
    try {
      await api('POST', `/api/knowledge/${encodeURIComponent(slug)}/documents`, form);
      setMessage(t('kb.uploaded', { name: file.name }));
      await load();
      onChanged();
    } catch (err) {
      setUploadError((err as Error).message);
    }
  };

  const search = async (e: Event) => {
    e.preventDefault();
    if (!query.trim()) return;
    setError(null);
    try {
      const answer = await api<{ results: Result[] }>('POST', `/api/knowledge/${encodeURIComponent(slug)}/search`, {
        query: query.trim(),
        top_k: 5,
      });
      setResults(answer.results);
    } catch (err) {
      setError((err as Error).message);
    }
  };

  if (!base) return error ? <p class="error" role="alert">{t('common.error', { message: error })}</p> : <p>{t('common.loading')}</p>;
  return (
    <section class="kb-detail" aria-labelledby="kb-detail-heading">
      <h2 id="kb-detail-heading">{base.name}</h2>
      {base.description && <p>{base.description}</p>}
      <p>
        <StatusText status={base.status} />{' '}
        <button type="button" class="link-button" onClick={load}>
          {t('kb.refresh')}
        </button>
      </p>
      <h3>{t('kb.docList')}</h3>
      <ul class="documents">
        {documents.map((d) => (
          <li>
            {d.name} <span class="muted small">{t('kb.chunks', { chunks: d.chunks })}</span>
          </li>
        ))}
      </ul>
      {base.takes_uploads && base.permission === 'manage' ? (
        <form onSubmit={upload} class="upload">
          <h3>{t('kb.upload')}</h3>
          <label for="kb-file">{t('kb.file')}</label>
          <input
            id="kb-file"
            type="file"
            aria-invalid={uploadError ? 'true' : undefined}
            aria-describedby={uploadError ? 'kb-file-error' : undefined}
            onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)}
          />
          {uploadError && (
            <p id="kb-file-error" class="field-error">
              {uploadError}
            </p>
          )}
          <button type="submit" disabled={!file}>
            {t('kb.uploadSubmit')}
          </button>
          <p role="status">{message}</p>
        </form>
      ) : (
        <p class="muted">{t('kb.noUploads')}</p>
      )}
      <form onSubmit={search} class="search" role="search">
        <h3>{t('kb.search')}</h3>
        <label for="kb-query">{t('kb.query')}</label>
        <div class="inline">
          <input id="kb-query" type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
          <button type="submit">{t('kb.searchSubmit')}</button>
        </div>
      </form>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      {results && (
        <section aria-labelledby="kb-results-heading" aria-live="polite">
          <h3 id="kb-results-heading">{t('kb.results')}</h3>
          {results.length === 0 ? (
            <p>{t('kb.noResults')}</p>
          ) : (
            <ol class="results">
              {results.map((r) => (
                <li>
                  <div class="muted small">
                    {r.document} · {r.location} · {r.score.toFixed(3)}
                  </div>
                  <blockquote>{r.text}</blockquote>
                </li>
              ))}
            </ol>
          )}
        </section>
      )}
    </section>
  );
}

export function KnowledgePage({ slug }: { slug: string | null }) {
  const [bases, setBases] = useState<Base[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [createError, setCreateError] = useState<string | null>(null);

  const load = () =>
    api<{ knowledge_bases: Base[] }>('GET', '/api/knowledge')
      .then((answer) => setBases(answer.knowledge_bases))
      .catch((err) => setError(err.message));
  useEffect(() => {
    load();
  }, []);

  const create = async (e: Event) => {
    e.preventDefault();
    setCreateError(null);
    try {
      const answer = await api<{ knowledge_base: Base }>('POST', '/api/knowledge', { name: name.trim() });
      setName('');
      await load();
      location.hash = `#/knowledge/${encodeURIComponent(answer.knowledge_base.slug)}`;
    } catch (err) {
      setCreateError((err as Error).message);
    }
  };

  return (
    <section aria-labelledby="kb-heading" class="knowledge">
      <h1 id="kb-heading">{t('kb.heading')}</h1>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      <div class="kb-layout">
        <div>
          {bases && bases.length === 0 && <p>{t('kb.empty')}</p>}
          {bases && bases.length > 0 && (
            <ul class="kb-list">
              {bases.map((b) => (
                <li data-slug={b.slug} class={b.slug === slug ? 'current' : ''}>
                  <a href={`#/knowledge/${encodeURIComponent(b.slug)}`} aria-current={b.slug === slug ? 'page' : undefined}>
                    {b.name}
                  </a>
                  <div class="small">
                    <StatusText status={b.status} />
                  </div>
                </li>
              ))}
            </ul>
          )}
          <form onSubmit={create} class="kb-create">
            <h2>{t('kb.create')}</h2>
            <label for="kb-name">{t('kb.name')}</label>
            <input
              id="kb-name"
              value={name}
              aria-invalid={createError ? 'true' : undefined}
              aria-describedby={createError ? 'kb-name-error' : undefined}
              onInput={(e) => setName(e.currentTarget.value)}
            />
            {createError && (
              <p id="kb-name-error" class="field-error">
                {createError}
              </p>
            )}
            <button type="submit" disabled={!name.trim()}>
              {t('kb.createSubmit')}
            </button>
          </form>
        </div>
        {slug && <BaseDetail key={slug} slug={slug} onChanged={load} />}
      </div>
    </section>
  );
}
