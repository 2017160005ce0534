import { Type } from 'typebox';
import { httpUrl, httpUrlDocumented, patternString } from '../http/schemas.js';

const WEBSITE = 'Merchant website';
const RESULT_URL = 'Receives payment callbacks, besides urls.callbackUrl of each payment';
const SERVER_URL = 'Merchant server API address; stored and shown, nothing is sent to it';

/** The seed's point-of-sale body; every field is required. */
export const PosBody = Type.Object({
  categoryId: Type.String({ format: 'uuid', description: 'From GET /api/v1/categories' }),
  posCompanyName: Type.String({ minLength: 1, maxLength: 100, description: 'One line: no control characters' }),
  description: Type.String({ maxLength: 500, description: 'Free text: no control characters but tab and line breaks' }),
  website: httpUrl(WEBSITE),
  resultUrl: httpUrl(RESULT_URL),
  serverUrl: httpUrl(SERVER_URL),
  trustAllCertificates: Type.Boolean({ description: 'Accept an unverifiable TLS certificate on callbacks for this POS' }),
  terminalId: patternString('^[A-Za-z0-9._-]{1,64}$', 'must be 1 to 64 letters, digits, dots, dashes or underscores', {
    description: '1-64 letters, digits, dot, dash or underscore; unique',
  }),
  merchantId: Type.String({ format: 'uuid', description: "Must be the caller's own merchantId" }),
});

/** The same body as /openapi.json describes it: with the URLs' form, which the handler checks. */
export const PosBodyDocumented = Type.Object({
  ...PosBody.properties,
  website: httpUrlDocumented(WEBSITE),
  resultUrl: httpUrlDocumented(RESULT_URL),
  serverUrl: httpUrlDocumented(SERVER_URL),
});

export const PointOfSale = Type.Object({
  posId: Type.String(),
  terminalId: Type.String(),
  merchantId: Type.String(),
  categoryId: Type.String(),
  posCompanyName: Type.String(),
  description: Type.String(),
  website: Type.String(),
  resultUrl: Type.String(),
  serverUrl: Type.String(),
  trustAllCertificates: Type.Boolean(),
  createdAt: Type.String(),
});
