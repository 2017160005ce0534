/**
 * Server-rendered HTML with escaping by default: every `${value}` in an html`` template is
 * escaped unless it is itself html`` (or raw()). User-supplied text (descriptions, company
 * names, message content) can only ever appear as text.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c] ?? c);
}

type Value = Html | string | number | boolean | null | undefined | Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  if (value instanceof Html) return value.value;
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** Trusted markup only (never user input). */
export function raw(markup: string): Html {
  return new Html(markup);
}

/** The page shell: no inline script or style, so the Content-Security-Policy can forbid both. */
export function page(options: { title: string; script?: string; body: Html; data?: Record<string, string> }): string {
  const data = Object.entries(options.data ?? {}).map(([k, v]) => html` data-${raw(k.replace(/[^a-z-]/g, ''))}="${v}"`);
  return `<!doctype html>${html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · Lipa</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/app.css">
${options.script ? html`<script type="module" src="/assets/${options.script}"></script>` : ''}
</head>
<body${data}>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><span class="brand">Lipa</span></header>
<main id="main">${options.body}</main>
</body>
</html>`}`;
}
