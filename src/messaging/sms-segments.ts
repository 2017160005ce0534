/**
 * How an SMS text travels: GSM 03.38 7-bit default alphabet when every character is in it,
 * UCS-2 (UTF-16 big-endian) otherwise, and how many SMS segments that takes.
 *
 * Rules (3GPP TS 23.038 / 23.040):
 * - GSM-7: a basic-table character is 1 septet; an extension-table character (`^ { } \ [ ~ ] | €`
 *   and form feed) is 2 septets (ESC + code). One SMS holds 160 septets; a multipart SMS
 *   spends 7 septets per segment on the concatenation header, leaving 153, and an ESC pair
 *   is never split across two segments.
 * - UCS-2: every UTF-16 code unit is 2 octets; a character outside the BMP (emoji) is a
 *   surrogate pair, 2 units. One SMS holds 70 units; a multipart SMS 67 per segment, and a
 *   surrogate pair is never split across two segments.
 */

/** GSM 03.38 basic table, in code order (0x00–0x7F); 0x1B is the escape to the extension table. */
const GSM_BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';

/** GSM 03.38 extension table: character → code after ESC. */
const GSM_EXTENSION: ReadonlyMap<string, number> = new Map([
  ['\f', 0x0a],
  ['^', 0x14],
  ['{', 0x28],
  ['}', 0x29],
  ['\\', 0x2f],
  ['[', 0x3c],
  ['~', 0x3d],
  [']', 0x3e],
  ['|', 0x40],
  ['€', 0x65],
]);

const GSM_BASIC_CODES: ReadonlyMap<string, number> = new Map(
  [...GSM_BASIC].map((char, code) => [char, code] as const).filter(([char]) => char !== '\x1b'),
);

const ESC = 0x1b;

export const GSM7_SINGLE_SEPTETS = 160;
export const GSM7_MULTIPART_SEPTETS = 153;
export const UCS2_SINGLE_UNITS = 70;
export const UCS2_MULTIPART_UNITS = 67;

export interface SegmentCount {
  encoding: 'gsm7' | 'ucs2';
  /** SMS segments needed (1 for a text that fits one SMS, also for an empty text). */
  segments: number;
  /** Characters as a person counts them (Unicode code points). */
  characters: number;
  /** Encoded length: septets for GSM-7 (extension characters count 2), UTF-16 code units for UCS-2. */
  units: number;
}

/** True when every character of `text` is in the GSM 03.38 basic or extension table. */
export function isGsm7(text: string): boolean {
  for (const char of text) {
    if (!GSM_BASIC_CODES.has(char) && !GSM_EXTENSION.has(char)) return false;
  }
  return true;
}

/** ASCII characters in the GSM 03.38 basic table (one septet each), by char code. */
const ASCII_BASIC = Uint8Array.from({ length: 128 }, (_, code) => (GSM_BASIC_CODES.has(String.fromCharCode(code)) ? 1 : 0));

export function countSegments(text: string): SegmentCount {
  // The common case, plain ASCII from the basic table: one septet a character.
  let plain = true;
  for (let i = 0; i < text.length && plain; i++) {
    const code = text.charCodeAt(i);
    plain = code < 128 && ASCII_BASIC[code] === 1;
  }
  if (plain) {
    const units = text.length;
    const segments = units <= GSM7_SINGLE_SEPTETS ? 1 : Math.ceil(units / GSM7_MULTIPART_SEPTETS);
    return { encoding: 'gsm7', characters: units, segments, units };
  }
  const chars = [...text];
  if (isGsm7(text)) {
    const sizes = chars.map((char) => (GSM_EXTENSION.has(char) ? 2 : 1));
    return { encoding: 'gsm7', characters: chars.length, ...split(sizes, GSM7_SINGLE_SEPTETS, GSM7_MULTIPART_SEPTETS) };
  }
  // A code point above U+FFFF is a surrogate pair in UTF-16: 2 units.
  const sizes = chars.map((char) => ((char.codePointAt(0) ?? 0) > 0xffff ? 2 : 1));
  return { encoding: 'ucs2', characters: chars.length, ...split(sizes, UCS2_SINGLE_UNITS, UCS2_MULTIPART_UNITS) };
}

/** Packs indivisible characters of the given sizes into segments. */
function split(sizes: number[], single: number, perPart: number): { segments: number; units: number } {
  const units = sizes.reduce((sum, size) => sum + size, 0);
  if (units <= single) return { segments: 1, units };
  let segments = 1;
  let used = 0;
  for (const size of sizes) {
    if (used + size > perPart) {
      segments++;
      used = 0;
    }
    used += size;
  }
  return { segments, units };
}

/**
 * GSM 03.38 text as unpacked septets, one per octet (what SMPP carries with data_coding 0);
 * extension characters become ESC + code. Throws on a character outside the alphabet.
 */
export function encodeGsm7(text: string): Buffer {
  const out: number[] = [];
  for (const char of text) {
    const basic = GSM_BASIC_CODES.get(char);
    if (basic !== undefined) {
      out.push(basic);
      continue;
    }
    const extension = GSM_EXTENSION.get(char);
    if (extension === undefined) throw new RangeError(`not in the GSM 03.38 alphabet: U+${(char.codePointAt(0) ?? 0).toString(16)}`);
    out.push(ESC, extension);
  }
  return Buffer.from(out);
}

/** Unpacked GSM 03.38 septets back to text (the inverse of encodeGsm7). */
export function decodeGsm7(septets: Uint8Array): string {
  let text = '';
  for (let i = 0; i < septets.length; i++) {
    const code = septets[i] ?? 0;
    if (code === ESC && i + 1 < septets.length) {
      const next = septets[++i] ?? 0;
      let found: string | undefined;
      for (const [char, extension] of GSM_EXTENSION) if (extension === next) found = char;
      // An unknown escape shows the basic character (23.038: "display the basic table character").
      text += found ?? GSM_BASIC[next & 0x7f] ?? ' ';
      continue;
    }
    text += GSM_BASIC[code & 0x7f] ?? ' ';
  }
  return text;
}

/** UCS-2 as SMSCs take it with data_coding 8: UTF-16 big-endian (surrogate pairs kept). */
export function encodeUcs2(text: string): Buffer {
  return Buffer.from(text, 'utf16le').swap16();
}

export function decodeUcs2(bytes: Uint8Array): string {
  const copy = Buffer.from(bytes.subarray(0, bytes.length - (bytes.length % 2)));
  return copy.swap16().toString('utf16le');
}
