// A PDF shown as pictures of its pages, drawn by pdf.js into canvases. Nothing in the file runs: pdf.js
// parses it in its worker (a file of this origin), its scripting is never loaded (the viewer's sandbox
// is not used), it generates no code (and the console's Content-Security-Policy allows no eval), XFA
// forms and annotations are not drawn, and no WebAssembly is fetched. pdf.js is loaded only when a PDF
// is opened.
import { useEffect, useRef, useState } from 'preact/hooks';
import { t } from '../i18n';

/** The most pages drawn; the rest is in the download. */
export const MAX_PDF_PAGES = 20;

export function PdfView({ data, name }: { data: ArrayBuffer; name: string }) {
  const holder = useRef<HTMLDivElement>(null);
  const [pages, setPages] = useState<{ drawn: number; total: number } | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    let close: (() => void) | undefined;
    (async () => {
      try {
        const pdfjs = await import('pdfjs-dist');
        const worker = await import('pdfjs-dist/build/pdf.worker.min.mjs?url');
        pdfjs.GlobalWorkerOptions.workerSrc = worker.default;
        const task = pdfjs.getDocument({
          data: new Uint8Array(data.slice(0)),
          enableXfa: false,
          useWasm: false,
          disableWorkerRendering: true,
        });
        close = () => void task.destroy();
        const document = await task.promise;
        const total = document.numPages;
        const drawn = Math.min(total, MAX_PDF_PAGES);
        for (let n = 1; n <= drawn && !stopped; n++) {
          const page = await document.getPage(n);
          const viewport = page.getViewport({ scale: 1.25 });
          const canvas = window.document.createElement('canvas');
          canvas.width = Math.ceil(viewport.width);
          canvas.height = Math.ceil(viewport.height);
          canvas.setAttribute('role', 'img');
          canvas.setAttribute('aria-label', t('files.pdfPage', { name, page: n, total }));
          holder.current?.appendChild(canvas);
          await page.render({ canvas, viewport, annotationMode: pdfjs.AnnotationMode.DISABLE }).promise;
        }
        if (!stopped) setPages({ drawn, total });
      } catch (err) {
        if (!stopped) setError((err as Error).message);
      }
    })();
    return () => {
      stopped = true;
      close?.();
    };
  }, [data]);

  return (
    <div class="pdf-view">
      <div ref={holder} class="pdf-pages" />
      {pages && pages.drawn < pages.total && <p class="muted small">{t('files.pdfMore', { drawn: pages.drawn, total: pages.total })}</p>}
      {error && <p class="error">{t('files.pdfError', { message: error })}</p>}
    </div>
  );
}
