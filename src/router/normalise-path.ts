/**
 * Request paths as the router routes and forwards them. A backend URL may carry a path prefix
 * (http://host:8000/api), and the request path goes after it; a path with dot segments —
 * `/v1/../../admin`, or encoded, `/v1/%2e%2e/%2e%2e/admin` — would otherwise resolve above that
 * prefix once joined (URL resolution removes them), reaching whatever the backend serves there.
 *
 * So every path is normalised as RFC 3986 says (§6.2.2): percent-encodings are validated and
 * upper-cased, encoded unreserved characters decoded (`%2e` is `.`), and dot segments removed
 * (§5.2.4) — before the router decides anything from it. Routing then sees `/admin`, not a `/v1/`
 * path, and what is forwarded has no dot segment left to resolve. Malformed encodings are the
 * client's error (400), never a crash.
 */

export type NormalisedPath =
  | {
      ok: true;
      /** The normalised path, starting with "/". */
      path: string;
      /** The query as received, "" or starting with "?". */
      query: string;
      /**
       * An encoded "/" or "\" (`%2F`, `%5C`) is kept encoded in `path`. Fine for routes the router
       * answers itself, but a backend that decodes before routing would see a separator the router
       * never saw, so such a path is not forwarded.
       */
      encodedSeparator: boolean;
    }
  | { ok: false; message: string };

const unreserved = /^[A-Za-z0-9\-._~]$/;

/** Normalises the request-target of an HTTP request (`req.url`). */
export function normaliseRequestPath(target: string): NormalisedPath {
  // Origin-form only: this router is not a forward proxy (absolute-form) and has no OPTIONS * route.
  if (!target.startsWith("/")) return { ok: false, message: `the request path ${JSON.stringify(target)} must start with "/"` };
  const at = target.indexOf("?");
  const rawPath = at === -1 ? target : target.slice(0, at);
  const query = at === -1 ? "" : target.slice(at);
  // Node's parser refuses most of these already; '\\' is a separator to some servers, '#' never belongs in a request.
  if (hasControlOrSpace(target) || /[#\\]/.test(rawPath)) {
    return { ok: false, message: "the request path holds a character that must be percent-encoded (a control character, space, '#' or '\\')" };
  }
  const badQuery = findMalformedEscape(query);
  if (badQuery !== undefined) return { ok: false, message: `malformed percent-encoding ${JSON.stringify(badQuery)} in the query` };

  const segments: string[] = [];
  let encodedSeparator = false;
  const raw = rawPath.split("/").slice(1);
  for (const [index, segment] of raw.entries()) {
    const normalised = normaliseSegment(segment);
    if (!normalised.ok) return normalised;
    encodedSeparator ||= normalised.encodedSeparator;
    const last = index === raw.length - 1;
    // Remove dot segments: "." stays where it is, ".." drops the segment before it (never above the root).
    if (normalised.segment === ".") {
      if (last) segments.push("");
    } else if (normalised.segment === "..") {
      segments.pop();
      if (last) segments.push("");
    } else {
      segments.push(normalised.segment);
    }
  }
  return { ok: true, path: `/${segments.join("/")}`, query, encodedSeparator };
}

/**
 * One segment: every `%` followed by two hex digits, the encoded bytes valid UTF-8, no encoded NUL;
 * encoded unreserved characters decoded, other encodings upper-cased.
 */
function normaliseSegment(segment: string): { ok: true; segment: string; encodedSeparator: boolean } | { ok: false; message: string } {
  if (!segment.includes("%")) return { ok: true, segment, encodedSeparator: false };
  const bad = findMalformedEscape(segment);
  if (bad !== undefined) return { ok: false, message: `malformed percent-encoding ${JSON.stringify(bad)} in the request path` };
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    return { ok: false, message: `the percent-encoded bytes of path segment ${JSON.stringify(segment)} are not UTF-8` };
  }
  if (decoded.includes("\0")) return { ok: false, message: "the request path holds an encoded NUL (%00)" };
  const normalised = segment.replace(/%([0-9A-Fa-f]{2})/g, (escape, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return unreserved.test(char) ? char : escape.toUpperCase();
  });
  return { ok: true, segment: normalised, encodedSeparator: /%2F|%5C/.test(normalised) };
}

/** A control character (U+0000–U+001F, U+007F) or a space anywhere in `text`. */
function hasControlOrSpace(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code <= 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** The first `%` not followed by two hex digits (with what follows it), or undefined. */
function findMalformedEscape(text: string): string | undefined {
  const match = /%(?![0-9A-Fa-f]{2})/.exec(text);
  return match === null ? undefined : text.slice(match.index, match.index + 3);
}
