// A conversation's files beside its chat: the folders its runs see (`outputs/`, `uploads/`, the user's
// `workspace/`) through Yuxi's viewer routes (`/api/viewer/filesystem/{tree,file,download}`). Markdown is
// rendered safely (src/markdown.ts), code highlighted safely (src/highlight.ts), other text shown as text,
// images shown from their bytes, PDFs drawn page by page by pdf.js (./pdf-view.tsx); anything else is
// offered as a download (an attachment the facade marks `nosniff`).
import { useEffect, useState } from 'preact/hooks';
import { api, getToken } from '../api';
import { t } from '../i18n';
import { highlightCode, languageOf } from '../highlight';
import { renderMarkdown } from '../markdown';
import { PdfView } from './pdf-view';

interface Entry {
  path: string;
  name: string;
  is_dir: boolean;
  size: number;
}

type Shown =
  | { kind: 'markdown'; html: string }
  | { kind: 'text'; text: string; truncated: boolean }
  | { kind: 'code'; html: string; language: string; truncated: boolean }
  | { kind: 'pdf'; data: ArrayBuffer }
  | { kind: 'image'; url: string }
  | { kind: 'download'; message: string };

function query(threadId: string, path: string): string {
  return `thread_id=${encodeURIComponent(threadId)}&path=${encodeURIComponent(path)}`;
}

/** A download of `path` with the session's token, saved under its name. */
async function download(threadId: string, path: string, name: string) {
  const response = await fetch(`/api/viewer/filesystem/download?${query(threadId, path)}`, {
    headers: { Authorization: `Bearer ${getToken() ?? ''}` },
  });
  if (!response.ok) return;
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** What the viewer answers for `path`, ready to show. */
async function open(threadId: string, path: string): Promise<Shown> {
  const response = await fetch(`/api/viewer/filesystem/file?${query(threadId, path)}`, {
    headers: { Authorization: `Bearer ${getToken() ?? ''}` },
  });
  if (!response.ok) return { kind: 'download', message: `${response.status} ${response.statusText}` };
  const type = response.headers.get('X-Yuxi-Preview-Type');
  // An SVG is a document that can hold script: offered as a download, never shown from a blob of this
  // origin (which a new tab would open as a page of the console's origin).
  if (type === 'image' && response.headers.get('Content-Type')?.startsWith('image/svg')) return { kind: 'download', message: t('files.noPreview') };
  if (type === 'image') return { kind: 'image', url: URL.createObjectURL(await response.blob()) };
  if (type === 'pdf') return { kind: 'pdf', data: await response.arrayBuffer() };
  if (type) return { kind: 'download', message: t('files.noPreview') };
  const preview = await response.json();
  if (!preview.supported || preview.content === null) return { kind: 'download', message: preview.message ?? t('files.noPreview') };
  if (preview.preview_type === 'markdown') return { kind: 'markdown', html: renderMarkdown(preview.content) };
  const language = languageOf(path.split('/').pop() ?? '');
  if (language) return { kind: 'code', html: highlightCode(preview.content, language), language, truncated: preview.truncated };
  return { kind: 'text', text: preview.content, truncated: preview.truncated };
}

/** The files of conversation `threadId`; `refresh` changes when a run of it ends. */
export function FilesPanel({ threadId, refresh }: { threadId: string; refresh: unknown }) {
  const [folder, setFolder] = useState('/outputs/');
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [selected, setSelected] = useState<Entry | null>(null);
  const [shown, setShown] = useState<Shown | null>(null);
  // Choosing a folder lists it again, the one shown included.
  const [listed, setListed] = useState(0);
  useEffect(() => {
    setEntries(null);
    api<{ entries: Entry[] }>('GET', `/api/viewer/filesystem/tree?${query(threadId, folder)}`)
      .then((answer) => setEntries(answer.entries))
      .catch(() => setEntries([]));
  }, [threadId, folder, refresh, listed]);
  useEffect(() => () => {
    if (shown?.kind === 'image') URL.revokeObjectURL(shown.url);
  }, [shown]);
  const pick = async (entry: Entry) => {
    if (entry.is_dir) {
      setFolder(entry.path);
      return;
    }
    setSelected(entry);
    setShown(null);
    setShown(await open(threadId, entry.path));
  };
  const parent = folder.replace(/[^/]+\/$/, '');
  return (
    <section class="files-panel" aria-labelledby="files-heading">
      <h2 id="files-heading">{t('files.heading')}</h2>
      <nav class="folders" aria-label={t('files.folders')}>
        {['/outputs/', '/uploads/', '/workspace/'].map((root) => (
          <button type="button" class="link" aria-pressed={folder.startsWith(root)} onClick={() => (setFolder(root), setListed((n) => n + 1))}>
            {t(`files.${root.slice(1, -1)}` as 'files.outputs')}
          </button>
        ))}
      </nav>
      <p class="muted small">{folder}</p>
      {entries === null ? (
        <p aria-live="polite">{t('common.loading')}</p>
      ) : (
        <ul class="file-list">
          {parent.length > 1 && !['/outputs/', '/uploads/', '/workspace/'].includes(folder) && (
            <li>
              <button type="button" class="link" onClick={() => setFolder(parent)}>
                ..
              </button>
            </li>
          )}
          {entries.length === 0 && <li class="muted">{t('files.empty')}</li>}
          {entries.map((entry) => (
            <li>
              <button type="button" class="link" aria-current={selected?.path === entry.path ? 'true' : undefined} onClick={() => pick(entry)}>
                {entry.is_dir ? `${entry.name}/` : entry.name}
              </button>
              {!entry.is_dir && <span class="muted small"> {entry.size} B</span>}
            </li>
          ))}
        </ul>
      )}
      {selected && (
        <article class="file-view" aria-label={selected.name}>
          <header>
            <strong>{selected.name}</strong>{' '}
            <button type="button" class="link" onClick={() => download(threadId, selected.path, selected.name)}>
              {t('files.download')}
            </button>
          </header>
          {shown === null && <p aria-live="polite">{t('common.loading')}</p>}
          {/* Sanitised by renderMarkdown: no script, handler or style survives. */}
          {shown?.kind === 'markdown' && <div class="markdown" dangerouslySetInnerHTML={{ __html: shown.html }} />}
          {shown?.kind === 'text' && <pre class="file-text">{shown.text}</pre>}
          {/* Sanitised by highlightCode: spans with classes only. */}
          {shown?.kind === 'code' && (
            <pre class="file-text">
              <code class={`hljs language-${shown.language}`} dangerouslySetInnerHTML={{ __html: shown.html }} />
            </pre>
          )}
          {(shown?.kind === 'text' || shown?.kind === 'code') && shown.truncated && <p class="muted small">{t('files.truncated')}</p>}
          {shown?.kind === 'pdf' && <PdfView data={shown.data} name={selected.name} />}
          {shown?.kind === 'image' && <img src={shown.url} alt={selected.name} class="file-image" />}
          {shown?.kind === 'download' && <p class="muted">{shown.message}</p>}
        </article>
      )}
    </section>
  );
}
