// Markdown from runs, rendered safely. `marked` turns it into HTML with any raw HTML in it escaped, shown
// as text: no tag a run wrote reaches the page. DOMPurify then keeps only inert markup of what `marked`
// made (no `javascript:` link, no handler, no style). Links open in a new tab without a referrer or an
// opener; images load only from this origin (the console's Content-Security-Policy says so too).
import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

const markdown = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html: ({ text }) => text.replace(/[&<>"']/g, (c) => ESCAPES[c]),
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

/** `text` (Markdown; raw HTML in it is shown as text) as sanitised HTML. */
export function renderMarkdown(text: string): string {
  const html = markdown.parse(text) as string;
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_ATTR: ['style'] });
}
