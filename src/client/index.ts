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
  reason?: 'declined_by_payer' | 'insufficient_funds' | 'cancelled_by_merchant';
  terminalId: string;
  orderId: string;
  amount: number;
  /** Refunded so far (0 when nothing was); a refund leaves the status paid. */
  refundedAmount: number;
  currency: string;
  merchantStika: string | null;
  description: string | null;
  createdAt: string;
  updatedAt: string;
  expiresAt: string;
  paymentUrl: string;
}

export interface RefundRequest {
  paymentIdentifier: string;
  /** Your own reference, 1-64 characters: the same reference and body again is the same refund. */
  refundReference: string;
  /** Major units; default all that is still refundable. */
  amount?: number;
  reason?: string;
}

export interface Refund {
  refundIdentifier: string;
  paymentIdentifier: string;
  refundReference: string;
  amount: number;
  currency: string;
  status: 'succeeded';
  reason: string | null;
  createdAt: string;
}

export interface Balance {
  currency: string;
  available: number;
  updatedAt: string;
}

export type TransactionType = 'payment' | 'refund' | 'payout' | 'settlement';

export interface Transaction {
  transactionId: string;
  type: TransactionType;
  /** Signed: + money in, − money out. */
  amount: number;
  currency: string;
  balanceAfter: number;
  reference: string;
  orderId?: string;
  occurredAt: string;
}

export interface TransactionFilter {
  /** ISO 8601 instants: `from` inclusive, `to` exclusive. */
  from?: string;
  to?: string;
  type?: TransactionType;
  /** Entries a page holds, 1 to 500 (default 100). */
  limit?: number;
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

type CallbackPayment = Pick<
  Payment,
  | 'paymentIdentifier'
  | 'status'
  | 'reason'
  | 'terminalId'
  | 'orderId'
  | 'amount'
  | 'refundedAmount'
  | 'currency'
  | 'merchantStika'
  | 'updatedAt'
>;

export type CallbackEvent =
  | { eventId: string; eventType: 'payment.status_changed'; occurredAt: string; payment: CallbackPayment }
  | { eventId: string; eventType: 'refund.succeeded'; occurredAt: string; refund: Refund; payment: CallbackPayment };

/** Thrown by the page iterator when a page is refused. */
export class LipaApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ApiError | null,
  ) {
    super(`Lipa answered ${status}${body?.error ? `: ${body.error.code}: ${body.error.message}` : ''}`);
  }
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

  /** Calls off a payment the payer has not answered: it becomes declined (cancelled_by_merchant). */
  cancelPayment(paymentIdentifier: string): Promise<ApiResponse<Payment | ApiError>> {
    return this.post('/api/public/v1/merchant-payments/cancel', { paymentIdentifier });
  }

  /** Refunds a paid payment, whole (no amount) or in part; 201 made, 200 the same request again. */
  refund(request: RefundRequest): Promise<ApiResponse<Refund | ApiError>> {
    return this.post('/api/public/v1/merchant-payments/refunds', request);
  }

  refundStatus(refundIdentifier: string): Promise<ApiResponse<Refund | ApiError>> {
    return this.post('/api/public/v1/merchant-payments/refunds/status', { refundIdentifier });
  }

  balance(): Promise<ApiResponse<Balance | ApiError>> {
    return this.post('/api/public/v1/balance', {});
  }

  /** One page of the statement, newest first; pass the previous page's nextCursor for the next. */
  transactionPage(filter: TransactionFilter = {}, cursor?: string): Promise<ApiResponse<Page<Transaction> | ApiError>> {
    return this.post('/api/public/v1/transactions', { ...filter, ...(cursor === undefined ? {} : { cursor }) });
  }

  /**
   * Every entry of the statement, newest first, fetched a page at a time as you iterate:
   *
   *   for await (const entry of lipa.transactions({ from: '2026-12-01T00:00:00Z' })) …
   *
   * A refused page throws LipaApiError.
   */
  async *transactions(filter: TransactionFilter = {}): AsyncGenerator<Transaction> {
    let cursor: string | undefined;
    do {
      const page = await this.transactionPage(filter, cursor);
      if (page.status !== 200) throw new LipaApiError(page.status, page.body as ApiError | null);
      const { data, nextCursor } = page.body as Page<Transaction>;
      yield* data;
      cursor = nextCursor ?? undefined;
    } while (cursor !== undefined);
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
