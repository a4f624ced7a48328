// The HTTP API, as the console uses it: JSON in and out, the error envelope as an ApiError,
// the token (kept for this tab in sessionStorage) sent as a bearer header. Streams cannot
// send headers: for them POST /ui/login sets an HttpOnly cookie the server also accepts.

const TOKEN_KEY = "tether.token";

export class ApiError extends Error {
  constructor(status, type, message, details) {
    super(message);
    this.status = status;
    this.type = type;
    this.details = details;
  }
}

let unauthorized = () => {};
let forbidden = () => {};

/** Called whenever the server answers 401: the page asks for the token again. */
export function onUnauthorized(callback) {
  unauthorized = callback;
}

/** Called whenever the server answers 403 (the identity's scopes changed since the page
 * read them): the page reads them again. The caller still shows the error's message. */
export function onForbidden(callback) {
  forbidden = callback;
}

export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const token = storedToken();
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function failure(response) {
  let type = "http_error";
  let message = `${response.status} ${response.statusText}`;
  let details;
  try {
    const body = await response.json();
    if (body && body.error) ({ type, message, details } = body.error);
  } catch {
    // not the envelope: keep the status line
  }
  return new ApiError(response.status, type, message, details);
}

/** A JSON request; resolves to the decoded body, rejects with an ApiError (or a TypeError
 * when the server cannot be reached). */
export async function request(method, path, { query, body, signal } = {}) {
  const url = query ? `${path}?${new URLSearchParams(clean(query))}` : path;
  const options = { method, headers: headers(), signal, credentials: "same-origin" };
  // The server takes a POST only if it says JSON, a bodiless one too (no other site's page
  // can send that header without asking first).
  if (method !== "GET") options.headers["Content-Type"] = "application/json";
  if (body !== undefined) options.body = JSON.stringify(body);
  const response = await fetch(url, options);
  if (!response.ok) {
    const error = await failure(response);
    if (response.status === 401 && !path.startsWith("/ui/")) unauthorized(error);
    if (response.status === 403 && error.type === "forbidden") forbidden(error);
    throw error;
  }
  return response.json();
}

function clean(query) {
  return Object.fromEntries(
    Object.entries(query).filter(([, value]) => value !== undefined && value !== null),
  );
}

export const get = (path, query, signal) => request("GET", path, { query, signal });
export const post = (path, body, query) => request("POST", path, { body, query });

/** Trade the token for the console's cookie; keep it for this tab. */
export async function login(token) {
  const answer = await request("POST", "/ui/login", { body: { token } });
  sessionStorage.setItem(TOKEN_KEY, token);
  return answer;
}

/** A fresh cookie for the streams, if this tab has the token: the last one expired or was
 * signed out elsewhere. Resolves to whether it got one. */
export async function renewSignIn() {
  const token = storedToken();
  if (!token) return false;
  try {
    await login(token);
    return true;
  } catch (error) {
    // Refused for good (a revoked or expired token): the page asks for another.
    if (error instanceof ApiError && error.status === 401) unauthorized(error);
    return false;
  }
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

export async function logout() {
  forgetToken();
  return request("POST", "/ui/logout");
}

/** The path of a session's routes: /agents/{agent}/{instance}. */
export function agentPath(key, tail = "") {
  return `/agents/${encodeURIComponent(key.agent)}/${encodeURIComponent(key.instance)}${tail}`;
}
