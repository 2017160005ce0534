import { domainToASCII, domainToUnicode } from 'node:url';
import validator from 'validator';

/** Email addresses as the messaging API takes them and the SMTP transport sends them. */

/** One plain address, `local@domain`: no display name, no quotes, no list, nothing that breaks a header. */
export const PLAIN_ADDRESS = /^[^\s<>,;:"()[\]\\@]+@[^\s<>,;:"()[\]\\@]+$/;

/**
 * Whether an address can be sent to as given and stored as it will be sent. On top of
 * validator.js (a real domain with a TLD, no IP domain):
 * - a plain `local@domain`: a quoted local part (`"john doe"@…`) is valid in RFC 5321 but
 *   cannot be passed on as one plain address;
 * - an ASCII local part: a UTF-8 one needs SMTPUTF8, which a mail server may not offer, and
 *   would then be sent raw;
 * - a domain already in its IDNA form: one that IDNA would change (an invisible U+200B
 *   dropped, a full-width letter mapped) would be sent to another domain than the one stored
 *   and shown. Upper case is fine (domains are case-insensitive).
 */
export function isSendableAddress(address: string): boolean {
  if (!PLAIN_ADDRESS.test(address)) return false;
  if (!validator.isEmail(address, { require_tld: true, allow_display_name: false, allow_ip_domain: false, allow_utf8_local_part: false }))
    return false;
  const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
  // ASCII: only its xn-- labels can be wrong (punycode that decodes to nothing valid).
  if (/^[\x21-\x7e]+$/.test(domain)) return !domain.includes('xn--') || domainToASCII(domain) === domain;
  const ascii = domainToASCII(domain);
  return ascii !== '' && domainToUnicode(ascii) === domain;
}
