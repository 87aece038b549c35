// Code from runs, highlighted safely. highlight.js (its core and the languages below) turns the text into
// spans with `hljs-*` classes, escaping everything it was given; DOMPurify then keeps only those spans,
// so nothing a file holds becomes markup. A file whose language is not known here is shown as text.
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const LANGUAGES = { bash, c, cpp, css, diff, dockerfile, go, ini, java, javascript, json, python, rust, sql, typescript, xml, yaml };
for (const [name, language] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, language);

/** The language of a file by its extension (or name), for the languages registered above. */
const BY_EXTENSION: Record<string, keyof typeof LANGUAGES> = {
  sh: 'bash', bash: 'bash', zsh: 'bash', c: 'c', h: 'c', cc: 'cpp', cpp: 'cpp', hpp: 'cpp', css: 'css',
  diff: 'diff', patch: 'diff', dockerfile: 'dockerfile', go: 'go', ini: 'ini', toml: 'ini', cfg: 'ini',
  java: 'java', js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript', json: 'json',
  jsonl: 'json', py: 'python', rs: 'rust', sql: 'sql', ts: 'typescript', tsx: 'typescript', html: 'xml',
  htm: 'xml', xml: 'xml', svg: 'xml', yaml: 'yaml', yml: 'yaml',
};

/** The language `name` is written in, when it is one highlighted here. */
export function languageOf(name: string): string | null {
  const lower = name.toLowerCase();
  const extension = lower === 'dockerfile' ? 'dockerfile' : lower.includes('.') ? lower.split('.').pop()! : '';
  return BY_EXTENSION[extension] ?? null;
}

/** `text`, written in `language`, as sanitised HTML: spans with `hljs-*` classes and escaped text only. */
export function highlightCode(text: string, language: string): string {
  const html = hljs.highlight(text, { language, ignoreIllegals: true }).value;
  return DOMPurify.sanitize(html, { ALLOWED_TAGS: ['span'], ALLOWED_ATTR: ['class'] });
}
