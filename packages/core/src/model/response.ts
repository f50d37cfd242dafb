/**
 * A downloaded response: what `parse` receives and the payload of the `response` topic.
 *
 * Bodies are held as bytes; `text()` decodes them once (charset sniffed like a browser does,
 * see `charset.ts`) and caches the string; `$` parses the HTML only when first touched and
 * caches the document, so a parse that reads `json()` never pays for an HTML parser.
 */

import type { CheerioAPI } from 'cheerio';
import type { ReadWorkbookOptions, Workbook } from '../data/excel/workbook.js';
import { TextDecodingError } from '../errors.js';
import { lazyRequire } from '../optional-dependency.js';
import { type DetectedCharset, decodeText, detectCharset } from './charset.js';
import { Request, type RequestData } from './request.js';

/** One hop of a redirect chain. */
export interface RedirectHop {
  /** The URL that answered with a redirect. */
  url: string;
  status: number;
  /** Where it pointed (absolute). */
  location: string;
}

/** Response headers as undici delivers them: lower-case names; repeated headers (set-cookie) as arrays. */
export type ResponseHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface ResponseInit {
  /** The final URL, after redirects. */
  url: string;
  status: number;
  headers: ResponseHeaders;
  body: Uint8Array;
  request: Request;
  redirects?: readonly RedirectHop[];
  /** Milliseconds from sending the request to the last body byte. */
  durationMs?: number;
}

/** The serializable shape of a {@link Response}. */
export interface ResponseData {
  url: string;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Raw bytes, or `{ base64 }` after a JSON round trip. */
  body: Uint8Array | { base64: string };
  request: Request | RequestData;
  redirects?: RedirectHop[];
  durationMs?: number;
  /** Present when the response was rendered by a browser: `Response.from` rebuilds a {@link BrowserResponse}. */
  browser?: BrowserResponseData;
}

/** What a {@link BrowserResponse} adds to its serialized form. */
export interface BrowserResponseData {
  rendered: boolean;
  /** Raw bytes, or `{ base64 }` after a JSON round trip. */
  screenshot?: Uint8Array | { base64: string };
}

export interface TextOptions {
  /** Throw TextDecodingError on bytes that are invalid in the charset instead of replacing them. @default false */
  fatal?: boolean;
  /** Decode as this charset instead of the detected one. */
  charset?: string;
}

/** cheerio is loaded on first use of `$`; the slim build parses with htmlparser2 only (fast, lenient). */
const cheerio = lazyRequire<{ load: (html: string) => CheerioAPI }>('cheerio/slim');

function cheerioLoad(html: string): CheerioAPI {
  return cheerio().load(html);
}

export class Response {
  /** The final URL (after redirects). Relative links resolve against it. */
  readonly url: string;
  readonly status: number;
  readonly headers: ResponseHeaders;
  /** The decoded (decompressed) body bytes. */
  readonly body: Uint8Array;
  /** The request that produced this response (its meta, method, depth…). */
  readonly request: Request;
  /** Every redirect followed on the way to `url`, in order; empty when there was none. */
  readonly redirects: readonly RedirectHop[];
  readonly durationMs: number;
  #charset: DetectedCharset | undefined;
  #text: string | undefined;
  #dom: CheerioAPI | undefined;

  constructor(init: ResponseInit) {
    this.url = init.url;
    this.status = init.status;
    this.headers = init.headers;
    this.body = init.body;
    this.request = init.request;
    this.redirects = init.redirects ?? [];
    this.durationMs = init.durationMs ?? 0;
  }

  /** True for 2xx. */
  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  /** A header by (case-insensitive) name; repeated headers are joined with ', '. */
  header(name: string): string | undefined {
    const value = this.headers[name.toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : value;
  }

  /** The MIME type of Content-Type, lower-case, without parameters ('text/html'). */
  get contentType(): string | undefined {
    const value = this.header('content-type');
    return value === undefined ? undefined : value.split(';', 1)[0]!.trim().toLowerCase();
  }

  /** The charset `text()` decodes with (BOM, Content-Type, `<meta>`, then UTF-8 or windows-1252: docs/crawling.md#character-encodings). */
  get charset(): string {
    return this.#detect().charset;
  }

  /** The body as a string, decoded with the detected charset. Cached (unless options are given). */
  text(options?: TextOptions): string {
    if (options === undefined || (!options.fatal && options.charset === undefined)) {
      if (this.#text === undefined) {
        const { charset, bomLength } = this.#detect();
        this.#text = decodeText(this.body, charset, bomLength);
      }
      return this.#text;
    }
    const detected = this.#detect();
    const charset = options.charset ?? detected.charset;
    const bomLength = options.charset === undefined ? detected.bomLength : 0;
    try {
      return decodeText(this.body, charset, bomLength, options.fatal ?? false);
    } catch (err) {
      throw new TextDecodingError(this.url, charset, { cause: err });
    }
  }

  /** `JSON.parse(text())`. Throws a SyntaxError for a body that is not JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.text()) as T;
  }

  /** The body parsed as HTML for CSS selection (cheerio). Parsed on first access, then cached. */
  get $(): CheerioAPI {
    this.#dom ??= cheerioLoad(this.text());
    return this.#dom;
  }

  /**
   * The body read as an xlsx workbook (a spreadsheet download): sheets → rows → DataFrames.
   * Needs the optional package exceljs; the reader loads on first use.
   */
  async workbook(options?: ReadWorkbookOptions): Promise<Workbook> {
    const { readWorkbook } = await import('../data/excel/workbook.js');
    return readWorkbook(this.body, options);
  }

  #detect(): DetectedCharset {
    this.#charset ??= detectCharset(this.body, this.header('content-type'));
    return this.#charset;
  }

  toJSON(): ResponseData {
    return {
      url: this.url,
      status: this.status,
      headers: { ...this.headers },
      body: { base64: base64Of(this.body) },
      request: this.request.toJSON(),
      redirects: [...this.redirects],
      durationMs: this.durationMs,
    };
  }

  /** The response itself when it already is one, else one rebuilt from its serialized form. */
  static from(value: Response | ResponseData): Response {
    if (value instanceof Response) return value;
    const init: ResponseInit = {
      url: value.url,
      status: value.status,
      headers: value.headers,
      body: bytesOf(value.body),
      request: Request.from(value.request),
      ...(value.redirects === undefined ? {} : { redirects: value.redirects }),
      ...(value.durationMs === undefined ? {} : { durationMs: value.durationMs }),
    };
    if (value.browser === undefined) return new Response(init);
    const { rendered, screenshot } = value.browser;
    return new BrowserResponse({
      ...init,
      rendered,
      ...(screenshot === undefined ? {} : { screenshot: bytesOf(screenshot) }),
    });
  }
}

/**
 * A response rendered by the browser downloader: a Response plus what only a browser has. It is
 * defined here, beside Response, so that a response crossing a serializing queue (Redis, NATS,
 * Kafka) comes back as a BrowserResponse with its screenshot, whichever process parses it.
 */
export class BrowserResponse extends Response {
  /** The screenshot asked for with `screenshot` (PNG or JPEG bytes). */
  readonly screenshot: Uint8Array | undefined;
  /** True when the body is the rendered DOM; false when the main document was not HTML and its raw bytes are the body. */
  readonly rendered: boolean;

  constructor(init: ResponseInit & { screenshot?: Uint8Array | undefined; rendered: boolean }) {
    super(init);
    this.screenshot = init.screenshot;
    this.rendered = init.rendered;
  }

  override toJSON(): ResponseData {
    return {
      ...super.toJSON(),
      browser: {
        rendered: this.rendered,
        ...(this.screenshot === undefined ? {} : { screenshot: { base64: base64Of(this.screenshot) } }),
      },
    };
  }
}

function base64Of(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64');
}

function bytesOf(value: Uint8Array | { base64: string }): Uint8Array {
  return value instanceof Uint8Array ? value : new Uint8Array(Buffer.from(value.base64, 'base64'));
}
