import { Type } from 'typebox';

export const KeyName = Type.Object({ name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) });
export const OptionalKeyName = Type.Union([KeyName, Type.Null()]);

export const ApiKeyCreated = Type.Object({
  keyId: Type.String({ description: 'Send as X-Service-Key-ID' }),
  secret: Type.String({ description: 'HMAC-SHA256 key (its UTF-8 bytes). Shown once; store it safely.' }),
  createdAt: Type.String(),
});
export const ApiKeyListed = Type.Object({
  keyId: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
  revokedAt: Type.Union([Type.String(), Type.Null()]),
});

export const MessagingKeyCreated = Type.Object({
  id: Type.String(),
  apiKey: Type.String({ description: 'Send as the api_key header. Shown once.' }),
});
export const MessagingKeyListed = Type.Object({
  id: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
  createdAt: Type.String(),
  revokedAt: Type.Union([Type.String(), Type.Null()]),
});

export const KeyIdParams = Type.Object({ keyId: Type.String() });
export const IdParams = Type.Object({ id: Type.String() });
