/**
 * findModelField against JSON.parse: on a seeded corpus of generated documents (nesting, strings
 * full of quotes, backslashes and escapes, `model` at several depths, duplicates, escaped key
 * spellings, whitespace everywhere) it finds the `model` JSON.parse keeps, and writing an upstream
 * name over its spans gives the document JSON.parse would with that name; then the edge cases.
 */
import { describe, expect, it } from "vitest";
import { createRandom } from "../../src/planner/test-model/random.js";
import { findModelField, type ByteSpan } from "../../src/router/find-model-field.js";

/** Writes random JSON documents as text, choosing each token's spelling (escapes, whitespace) itself. */
function createDocumentWriter(seed: number) {
  const random = createRandom(seed);
  const below = (n: number): number => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[below(items.length)] as T;

  const whitespace = (): string => pick(["", "", "", " ", "\n", "\t", "\r\n  ", "  "]);
  // Characters strings are built from: the ones that need escaping, multi-byte UTF-8, a surrogate pair.
  const characters = ['"', "\\", "/", "\n", "\t", "\u0001", "a", "m", "o", "d", "e", "l", "{", "}", "[", "]", ":", ",", " ", "é", "€", "😀", "model"];

  /** `\uXXXX` for each UTF-16 unit of `char` (two for one outside the BMP: a surrogate pair). */
  const escapeUnicode = (char: string): string =>
    Array.from({ length: char.length }, (_, i) => {
      const hex = char.charCodeAt(i).toString(16).padStart(4, "0");
      return `\\u${random() < 0.5 ? hex : hex.toUpperCase()}`;
    }).join("");
  /** A JSON string token for `text`, each character written plainly or escaped at random. */
  const writeString = (text: string, escapeChance = 0.3): string => {
    let token = '"';
    for (const char of text) {
      const short = char === "/" ? "\\/" : JSON.stringify(char).slice(1, -1);
      const mustEscape = short !== char && char !== "/";
      if (!mustEscape && random() >= escapeChance) token += char;
      else if (random() < 0.5 || short === char) token += escapeUnicode(char);
      else token += short;
    }
    return `${token}"`;
  };
  const randomText = (): string => Array.from({ length: below(6) }, () => pick(characters)).join("");

  const writeScalar = (): string => pick([() => writeString(randomText()), () => String(below(1000) - 500), () => "1.5e3", () => "true", () => "false", () => "null"])();

  const writeArray = (depth: number): string => {
    const items = Array.from({ length: below(4) }, () => whitespace() + writeValue(depth + 1) + whitespace());
    return `[${items.join(",") || whitespace()}]`;
  };

  const writeObject = (depth: number): string => {
    const keys = ["model", "model", "a", "messages", "mode", "models", "Model", 'mo"del', "mod\\el", "content"];
    const members = Array.from({ length: below(5) }, () => {
      const key = pick(keys);
      // `model` is often spelled with escapes, which must still count as `model`.
      const keyToken = writeString(key, key === "model" ? 0.5 : 0.2);
      const value = key === "model" && random() < 0.7 ? writeString(randomText()) : writeValue(depth + 1);
      return `${whitespace()}${keyToken}${whitespace()}:${whitespace()}${value}${whitespace()}`;
    });
    return `{${members.join(",") || whitespace()}}`;
  };

  const writeValue = (depth: number): string => {
    if (depth > 4) return writeScalar();
    const roll = random();
    if (roll < 0.3) return writeObject(depth);
    if (roll < 0.5) return writeArray(depth);
    return writeScalar();
  };

  return {
    /** Mostly objects at the top level; now and then an array or a scalar. */
    writeDocument: (): string => whitespace() + (random() < 0.9 ? writeObject(0) : writeValue(0)) + whitespace(),
    randomText,
  };
}

/** The body with `replacement` written over each span, as the router does for an upstream name. */
function spliceSpans(body: Buffer, spans: ByteSpan[], replacement: string): Buffer {
  const parts: Buffer[] = [];
  let copied = 0;
  for (const [start, end] of spans) {
    parts.push(body.subarray(copied, start), Buffer.from(replacement, "utf8"));
    copied = end;
  }
  parts.push(body.subarray(copied));
  return Buffer.concat(parts);
}

/** What JSON.parse gives for the document's `model` when it is a string. */
function parsedModel(parsed: unknown): string | undefined {
  const model: unknown = typeof parsed === "object" && parsed !== null ? (parsed as { model?: unknown }).model : undefined;
  return typeof model === "string" ? model : undefined;
}

describe("findModelField on a generated corpus", () => {
  it("agrees with JSON.parse on every document, and splicing an upstream name gives JSON.parse's object with that model", () => {
    const writer = createDocumentWriter(20_240_611);
    let withModel = 0;
    let duplicated = 0;
    let withoutModel = 0;
    for (let n = 0; n < 20_000; n++) {
      const text = writer.writeDocument();
      const body = Buffer.from(text, "utf8");
      const parsed: unknown = JSON.parse(text);
      const expected = parsedModel(parsed);
      const found = findModelField(body);
      expect(found?.model, text).toBe(expected);
      if (found === undefined) {
        withoutModel += 1;
        continue;
      }
      withModel += 1;
      if (found.spans.length > 1) duplicated += 1;
      for (const [start, end] of found.spans) {
        expect(body[start], text).toBe(0x22);
        expect(typeof JSON.parse(body.subarray(start, end).toString("utf8")), text).toBe("string");
      }
      const upstream = writer.randomText();
      const spliced: unknown = JSON.parse(spliceSpans(body, found.spans, JSON.stringify(upstream)).toString("utf8"));
      expect(spliced, text).toEqual({ ...(parsed as object), model: upstream });
    }
    // The corpus exercises every outcome, not only the easy one.
    expect(withModel).toBeGreaterThan(2000);
    expect(duplicated).toBeGreaterThan(200);
    expect(withoutModel).toBeGreaterThan(2000);
  });
});

describe("findModelField", () => {
  const find = (text: string) => findModelField(Buffer.from(text, "utf8"));

  it("finds a plain model and the span of its value token, quotes included", () => {
    const text = '{"messages": [], "model" : "llama"}';
    const found = find(text);
    expect(found?.model).toBe("llama");
    expect(found?.spans).toEqual([[text.indexOf('"llama"'), text.indexOf('"llama"') + '"llama"'.length]]);
  });

  it("is undefined when the top level is not an object", () => {
    for (const text of ['[{"model":"m"}]', '"model"', "42", "null", "true", "", "   ", '\ufeff{"model":"m"}']) expect(find(text), text).toBeUndefined();
  });

  it("is undefined for an unterminated string, in a key or in the value", () => {
    expect(find('{"model":"m')).toBeUndefined();
    expect(find('{"model":"m\\"}')).toBeUndefined();
    expect(find('{"a":"x","mod')).toBeUndefined();
  });

  it("is undefined when the top-level object is left open or followed by more than whitespace, or the model does not decode", () => {
    expect(find('{"model":"m", "a": [{}')).toBeUndefined();
    expect(find('{"model":"m"} {}')).toBeUndefined();
    expect(find('{"model":"m"} \n')?.model).toBe("m");
    expect(find('{"model":"bad \\u00zz"}')).toBeUndefined();
    expect(find('{"model":"bad \\x"}')).toBeUndefined();
  });

  it("is undefined when a top-level key has no `:` after it", () => {
    expect(find('{"model" "m"}')).toBeUndefined();
    expect(find('{"a" 1, "model": "m"}')).toBeUndefined();
  });

  it("ignores `model` inside nested objects and arrays, and inside strings", () => {
    expect(find('{"a":{"model":"m"}}')).toBeUndefined();
    expect(find('{"a":[{"model":"m"}], "b": "\\"model\\": \\"x\\""}')).toBeUndefined();
    expect(find('{"a":{"model":"inner"},"model":"outer"}')?.model).toBe("outer");
  });

  it("keeps the last duplicate, as JSON.parse does, and lists every string span", () => {
    const text = '{"model":"a","model":"b"}';
    const found = find(text);
    expect(found?.model).toBe("b");
    expect(found?.spans).toEqual([
      [9, 12],
      [21, 24],
    ]);
    expect(find('{"model":"a","model":5}')).toBeUndefined();
    expect(find('{"model":null,"model":"b"}')).toEqual({ model: "b", spans: [[22, 25]] });
  });

  it("reads a key spelled with escapes as the same key, and decodes the value", () => {
    expect(find('{"mod\\u0065l":"m"}')?.model).toBe("m");
    expect(find('{"\\u006d\\u006F\\u0064\\u0065\\u006c":"m"}')?.model).toBe("m");
    expect(find('{"model":"a\\"b\\\\c\\u00e9\\ud83d\\ude00"}')?.model).toBe('a"b\\cé😀');
    expect(find('{"x":"ends in a backslash\\\\","model":"m"}')?.model).toBe("m");
  });

  it("reads a plain Uint8Array, and a Buffer that starts inside a larger allocation", () => {
    const bytes = new TextEncoder().encode('{"model":"é"}');
    expect(findModelField(bytes)?.model).toBe("é");
    const padded = Buffer.from('xxxx{"model":"m"}', "utf8").subarray(4);
    expect(findModelField(padded)).toEqual({ model: "m", spans: [[9, 12]] });
  });
});
