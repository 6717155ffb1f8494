// Typed client for the SAgents lifecycle service. The types in `schema.d.ts` are generated
// from the service's committed OpenAPI document (`npm run generate`); the calls are
// openapi-fetch's, so every path, parameter, body and response is checked by the compiler.
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";
export type Schemas = components["schemas"];
export type Problem = Schemas["Problem"];
export type SagentsClient = Client<paths>;

export interface ClientOptions {
  /** The service's base URL, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** A bearer token of one role (`admin`, `runtime`, `frontend` or `metrics`). */
  token: string;
  /** Another `fetch` (tests, proxies); the global one by default. */
  fetch?: typeof fetch;
}

/** Writes that carry no `Idempotency-Key` get a fresh one, so a retried call is answered once. */
const idempotency: Middleware = {
  onRequest({ request }) {
    if (request.method !== "GET" && !request.headers.has("idempotency-key")) {
      request.headers.set("idempotency-key", crypto.randomUUID());
    }
    return request;
  },
};

/** A client that authenticates every call with `token`. */
export function createSagentsClient({ baseUrl, token, fetch }: ClientOptions): SagentsClient {
  const client = createClient<paths>({
    baseUrl,
    headers: { authorization: `Bearer ${token}` },
    ...(fetch ? { fetch } : {}),
  });
  client.use(idempotency);
  return client;
}

/** The problem+json a failed call returned, as an `Error` that says what is wrong. */
export class SagentsError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem | undefined,
  ) {
    super(`${status} ${problem?.code ?? ""}: ${problem?.detail ?? problem?.title ?? "request failed"}`);
  }
}

/** The data of a successful call, or a `SagentsError` thrown for its problem. */
export async function expectOk<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await call;
  if (error !== undefined || data === undefined) {
    throw new SagentsError(response.status, error as Problem | undefined);
  }
  return data;
}
