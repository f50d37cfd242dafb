/** The tiny HTML helpers every fixture page uses. Plain string building: no template engine. */

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for HTML content and double-quoted attributes. Only needed for request-derived text. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** A complete UTF-8 HTML document. `head` is extra markup for `<head>`. */
export function htmlPage(title: string, body: string, head = ''): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${title}</title>
${head}</head>
<body>
${body}
</body>
</html>
`;
}

export const HTML_TYPE = 'text/html; charset=utf-8';
export const JSON_TYPE = 'application/json; charset=utf-8';
export const TEXT_TYPE = 'text/plain; charset=utf-8';
