import { signRequest, type VerifyCallbackInput, verifyCallback } from './signing.js';

export type { SignatureHeaders, SignInput, VerifyCallbackInput } from './signing.js';
export { bodyHash, SIGNATURE_HEADERS, signingString, signRequest, verifyCallback } from './signing.js';

export interface PaymentRequest {
  terminalId: string;
  currency: string;
  amount: number;
  merchantStika?: string;
  orderId: string;
  description?: string;
  payer: { method: 'phone'; value: string };
  urls: { callbackUrl: string; successRedirectUrl?: string };
}

export type PaymentStatus = 'pending' | 'no_user' | 'paid' | 'declined' | 'expired';

export interface Payment {
  paymentIdentifier: string;
  status: PaymentStatus;
  reason?: 'declined_by_payer' | 'insufficient_funds';
  terminalId: string;
  orderId: string;
  amount: number;
  currency: string;
  merchantStika: string | null;
  description: string | null;
  createdAt: string;
  updatedAt: string;
  expiresAt: string;
  paymentUrl: string;
}

export interface CallbackEvent {
  eventId: string;
  eventType: 'payment.status_changed';
  occurredAt: string;
  payment: Pick<
    Payment,
    'paymentIdentifier' | 'status' | 'reason' | 'terminalId' | 'orderId' | 'amount' | 'currency' | 'merchantStika' | 'updatedAt'
  >;
}

/** An answer of the API: the status code and the parsed JSON body. */
export interface ApiResponse<T> {
  status: number;
  body: T;
}

export interface ApiError {
  error: { code: string; message: string; details?: { field: string; message: string }[] };
  requestId: string;
}

export interface LipaClientOptions {
  /** `{payments_url}`, e.g. https://pay.example.com */
  baseUrl: string;
  keyId: string;
  secret: string;
  fetch?: typeof fetch;
}

/**
 * The merchant side of Lipa's signed payment API: signs every request with a fresh nonce
 * (CONTRACT §5) and verifies callbacks. Only depends on node:crypto and fetch.
 *
 *   const lipa = new LipaClient({ baseUrl, keyId, secret });
 *   const { status, body } = await lipa.createPayment({ terminalId, currency: 'KES', ... });
 */
export class LipaClient {
  private readonly fetch: typeof fetch;

  constructor(private readonly options: LipaClientOptions) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  createPayment(request: PaymentRequest): Promise<ApiResponse<Payment | ApiError>> {
    return this.post('/api/public/v1/merchant-payments', request);
  }

  paymentStatus(paymentIdentifier: string): Promise<ApiResponse<Payment | ApiError>> {
    return this.post('/api/public/v1/merchant-payments/status', { paymentIdentifier });
  }

  /** Verifies a callback Lipa sent to `url` (the callback URL as Lipa called it). */
  verifyCallback(input: Omit<VerifyCallbackInput, 'secret'>): boolean {
    return verifyCallback({ ...input, secret: this.options.secret });
  }

  /** Signs and sends one POST; the body is serialised once and those exact bytes are hashed. */
  async post<T>(path: string, payload: unknown): Promise<ApiResponse<T>> {
    const url = new URL(path, this.options.baseUrl);
    const body = JSON.stringify(payload);
    const headers = signRequest({ keyId: this.options.keyId, secret: this.options.secret, method: 'POST', url, body });
    const response = await this.fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : null) as T };
  }
}
