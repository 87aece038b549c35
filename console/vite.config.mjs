// Builds the console into dist/, which the facade embeds and serves at /console/ (src/facade/console.rs).
// Everything is emitted as files (no inline script, style or data URL) so that the strict
// Content-Security-Policy the facade sends holds.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: process.env.CONSOLE_OUT_DIR || 'dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
});
