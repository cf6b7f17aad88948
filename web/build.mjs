// Builds the dashboard's static files into dist/: src/app.js with what it imports (uPlot and
// the CSS) bundled and minified by esbuild into app.js and app.css, and src/index.html as is.
// Nothing is fetched at run time: the page loads these three files from `loom dashboard` only.
//   npm ci && npm run build          (meson runs this through scripts/web_embed.py)
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';

mkdirSync('dist', { recursive: true });
await build({
  entryPoints: ['src/app.js'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  outdir: 'dist',
  legalComments: 'eof', // uPlot's MIT notice stays in the bundle
  logLevel: 'warning',
});
copyFileSync('src/index.html', 'dist/index.html');
