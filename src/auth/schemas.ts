import { Type } from 'typebox';

export const LoginBody = Type.Object({
  login: Type.String({ minLength: 1, maxLength: 254, description: 'Merchant email, or payer phone digits with country code' }),
  password: Type.String({ minLength: 1, maxLength: 1024, description: 'Merchant password, or payer wallet PIN' }),
});

export const LoginResponse = Type.Object({
  status: Type.Literal('otp_sent'),
  expiresIn: Type.Integer({ description: 'Seconds the OTP stays valid' }),
});

export const ConfirmBody = Type.Object({
  login: Type.String({ minLength: 1, maxLength: 254 }),
  otp: Type.String({ minLength: 1, maxLength: 32 }),
});

export const TokenResponse = Type.Object({
  token: Type.String(),
  tokenType: Type.Literal('Bearer'),
  expiresIn: Type.Integer({ description: 'Seconds the token stays valid' }),
});
