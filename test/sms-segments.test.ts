import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import parsePhoneNumber from 'libphonenumber-js';
import { countSegments, decodeGsm7, decodeUcs2, encodeGsm7, encodeUcs2, isGsm7 } from '../src/messaging/sms-segments.js';
import { splitPhone } from '../src/notifier/notifier.js';

/** SMS encoding and segment counting (GSM 03.38 / UCS-2), a pure function. */

describe('countSegments', () => {
  test('plain GSM text: 160 septets fit one SMS, then 153 per segment', () => {
    assert.deepEqual(countSegments('Hello'), { encoding: 'gsm7', segments: 1, characters: 5, units: 5 });
    assert.deepEqual(countSegments('a'.repeat(160)), { encoding: 'gsm7', segments: 1, characters: 160, units: 160 });
    assert.deepEqual(countSegments('a'.repeat(161)), { encoding: 'gsm7', segments: 2, characters: 161, units: 161 });
    assert.equal(countSegments('a'.repeat(306)).segments, 2);
    assert.equal(countSegments('a'.repeat(307)).segments, 3);
    assert.equal(countSegments('a'.repeat(459)).segments, 3);
    assert.equal(countSegments('a'.repeat(460)).segments, 4);
  });

  test('an empty text is one (empty) SMS', () => {
    assert.deepEqual(countSegments(''), { encoding: 'gsm7', segments: 1, characters: 0, units: 0 });
  });

  test('the whole basic table is GSM, including @ £ Δ Ñ ¿ newline and carriage return', () => {
    const basic =
      '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
    assert.equal(isGsm7(basic), true);
    assert.deepEqual(countSegments(basic), { encoding: 'gsm7', segments: 1, characters: 127, units: 127 });
  });

  test('extension characters count two septets each', () => {
    const extension = '^{}\\[~]|€\f';
    assert.deepEqual(countSegments(extension), { encoding: 'gsm7', segments: 1, characters: 10, units: 20 });
    assert.deepEqual(countSegments('€'.repeat(80)), { encoding: 'gsm7', segments: 1, characters: 80, units: 160 });
    // 162 septets: multipart, 76 escape pairs per 153-septet segment.
    assert.deepEqual(countSegments('€'.repeat(81)), { encoding: 'gsm7', segments: 2, characters: 81, units: 162 });
    assert.equal(countSegments(`${'a'.repeat(159)}€`).segments, 2);
  });

  test('an escape pair is never split across segments', () => {
    // 306 septets would be 2 × 153, but the € at septets 153-154 moves to the second segment.
    const text = `${'a'.repeat(152)}€${'a'.repeat(152)}`;
    assert.deepEqual(countSegments(text), { encoding: 'gsm7', segments: 3, characters: 305, units: 306 });
    assert.equal(countSegments(`${'a'.repeat(151)}€${'a'.repeat(153)}`).segments, 2);
  });

  test('characters outside GSM 03.38 switch the whole text to UCS-2: 70 units, then 67 per segment', () => {
    for (const char of ['ç', 'ж', '\t', '`', 'ł', '’', '😀', 'Ā']) assert.equal(isGsm7(`abc${char}`), false, char);
    assert.deepEqual(countSegments('Привет'), { encoding: 'ucs2', segments: 1, characters: 6, units: 6 });
    assert.equal(countSegments('ж'.repeat(70)).segments, 1);
    assert.equal(countSegments('ж'.repeat(71)).segments, 2);
    assert.equal(countSegments('ж'.repeat(134)).segments, 2);
    assert.equal(countSegments('ж'.repeat(135)).segments, 3);
    // One non-GSM character makes a 100-character text three segments instead of one.
    assert.equal(countSegments(`${'a'.repeat(99)}ç`).segments, 2);
    assert.equal(countSegments(`${'a'.repeat(69)}ç`).segments, 1);
  });

  test('an emoji is a surrogate pair: two UCS-2 units, never split across segments', () => {
    assert.deepEqual(countSegments('Habari 😀'), { encoding: 'ucs2', segments: 1, characters: 8, units: 9 });
    assert.deepEqual(countSegments('😀'.repeat(35)), { encoding: 'ucs2', segments: 1, characters: 35, units: 70 });
    assert.deepEqual(countSegments('😀'.repeat(36)), { encoding: 'ucs2', segments: 2, characters: 36, units: 72 });
    const straddling = `${'ж'.repeat(66)}😀${'ж'.repeat(66)}`;
    assert.deepEqual(countSegments(straddling), { encoding: 'ucs2', segments: 3, characters: 133, units: 134 });
  });
});

describe('encoding', () => {
  test('GSM 03.38 as unpacked septets with ESC for the extension table', () => {
    assert.deepEqual([...encodeGsm7('@£A\n')], [0x00, 0x01, 0x41, 0x0a]);
    assert.deepEqual(
      [...encodeGsm7('€{}\\[~]|^\f')],
      [0x1b, 0x65, 0x1b, 0x28, 0x1b, 0x29, 0x1b, 0x2f, 0x1b, 0x3c, 0x1b, 0x3d, 0x1b, 0x3e, 0x1b, 0x40, 0x1b, 0x14, 0x1b, 0x0a],
    );
    assert.deepEqual([...encodeGsm7('Ñ¿à_')], [0x5d, 0x60, 0x7f, 0x11]);
    assert.throws(() => encodeGsm7('ж'), RangeError);
    const text = 'Lipa: KES 1,000 paid {ref: A1} €5 ~ [ok] | Δ@£';
    assert.equal(decodeGsm7(encodeGsm7(text)), text);
  });

  test('UCS-2 big-endian, surrogate pairs kept', () => {
    assert.deepEqual([...encodeUcs2('Hж')], [0x00, 0x48, 0x04, 0x36]);
    assert.deepEqual([...encodeUcs2('😀')], [0xd8, 0x3d, 0xde, 0x00]);
    assert.equal(decodeUcs2(encodeUcs2('Habari 😀')), 'Habari 😀');
  });
});

describe('splitPhone (the service’s own SMS: OTPs and payment prompts)', () => {
  test('splits off the calling code as libphonenumber does, keeping every digit', () => {
    const numbers = ['254708000003', '14155552671', '447911123456', '5491123456789', '8613800138000', '79161234567', '2348012345678'];
    for (const digits of numbers) {
      const parsed = parsePhoneNumber(`+${digits}`);
      assert.ok(parsed, digits);
      const split = splitPhone(digits);
      assert.deepEqual(split, { countryCode: parsed.countryCallingCode, number: parsed.nationalNumber }, digits);
      assert.equal(split.countryCode + split.number, digits);
    }
  });

  test('digits that start with no calling code stay whole', () => {
    assert.deepEqual(splitPhone('999123456'), { countryCode: '', number: '999123456' });
  });
});
