"""The error envelope: every failure answers ``{"error": {"type", "message", "details"?}}``.

This module holds the status of every error Tether defines, the handlers that answer
them, and the envelope's model with :func:`failures`, which documents a route's error
answers in ``/openapi.json``. Envelopes are written by hand (orjson), not from the model:
the model is the contract, and tests/http/test_openapi.py checks that real answers keep
to it.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from tether import errors

__all__ = (
    "BODY_FAILURES",
    "POST_FAILURES",
    "ApiError",
    "ErrorBody",
    "ErrorEnvelope",
    "FieldProblem",
    "Responses",
    "error_response",
    "failures",
    "install_error_handlers",
    "internal_error_response",
    "json_response",
    "status_of",
)

E = errors
# Every error class Tether defines, with the status it answers (tests/http/test_errors.py
# checks none is missing). 4xx: the caller can act on it. 5xx: the server's side failed;
# those a client should retry later are 503, a model provider's failure is 502, a
# feature the store does not offer is 501.
_STATUS: dict[type[errors.TetherError], int] = {
    E.TetherError: 500,
    # encoding: a value the caller sent cannot be written or read back
    E.CanonicalizationError: 422,
    E.RecordDecodeError: 422,
    E.ExportRefused: 422,
    # identity
    E.Unauthenticated: 401,
    E.Forbidden: 403,
    E.IdentityProviderUnavailable: 503,
    # stores
    E.StoreError: 503,
    E.StoreUnavailable: 503,
    E.StoreCapabilityMissing: 501,
    E.UnsupportedSchema: 500,
    E.Conflict: 409,
    E.Fenced: 409,
    E.ClaimLost: 409,
    E.DispatchConflict: 409,
    E.VersionConflict: 409,
    E.TokenExists: 409,
    E.SubagentLimitReached: 409,
    E.SeqOutOfRange: 422,
    E.SeqTruncated: 410,
    E.InvalidSeq: 422,
    E.InvalidCursor: 422,
    E.InvalidMetadata: 422,
    E.SessionExists: 409,
    E.LogTampered: 409,
    E.NotFound: 404,
    E.SubmissionNotFound: 404,
    E.ConversationNotFound: 404,
    E.AttachmentNotFound: 404,
    E.TokenNotFound: 404,
    E.TenantNotFound: 404,
    # journal: a harness's misuse is the server's failure, not the caller's
    E.JournalError: 500,
    E.ReplayDiverged: 500,
    E.McpToolsChanged: 500,
    E.RecordedModelFailure: 500,
    E.InvalidExecutionLog: 500,
    E.IncompleteInvocation: 500,
    E.InheritedToolIntent: 409,
    E.HarnessMismatch: 500,
    E.Parked: 409,
    E.ApprovalParked: 409,
    E.ChildrenPending: 409,
    E.TimerParked: 409,
    E.ApprovalBlocked: 409,
    E.ApprovalNotFound: 404,
    E.ApprovalConflict: 409,
    E.InvalidApproval: 409,
    E.InvalidEditArgs: 422,
    E.InputParked: 409,
    E.InputNotFound: 404,
    E.InputConflict: 409,
    E.InputClosed: 409,
    E.InvalidAnswer: 422,
    E.NoPendingExecution: 409,
    E.HostOwnedOutcome: 500,
    E.MissingIdempotencyKey: 500,
    E.UnmediatedToolCall: 500,
    E.DuplicateCallId: 500,
    E.MissingToolExecutor: 500,
    E.TurnClosed: 500,
    # integrations: an agent a server was given, or its run, that cannot be journaled
    E.UnsupportedConstruct: 500,
    E.NotJournaled: 500,
    # engine
    E.TransientError: 503,
    E.McpServerUnavailable: 503,
    E.UnknownAgent: 404,
    E.UnknownVersion: 422,
    E.InvalidDispatch: 422,
    E.SessionBusy: 409,
    E.NoRunInFlight: 409,
    E.RuntimeClosed: 503,
    E.FailpointSpecInvalid: 400,
    # models
    E.ModelError: 502,
    E.ModelTransientError: 503,
    E.ModelFatalError: 502,
    E.ContextOverflow: 502,
    E.ProviderError: 502,
    E.ProviderRateLimited: 503,
    E.ProviderTimeout: 502,
}

logger = logging.getLogger("tether.http")


class FieldProblem(BaseModel):
    """What is wrong with one field of a request: its dotted path (``session``,
    ``args.to``) and, for an invalid request, what is wrong with it."""

    field: str
    message: str | None = None


class ErrorBody(BaseModel):
    type: str = Field(
        description="Stable and machine-readable: the error class's code (``session_busy``, "
        "``unknown_agent``...) or the HTTP layer's own (``invalid_request``, ``unauthorized``...)."
    )
    message: str = Field(description="For a human; never holds the server's internals.")
    details: FieldProblem | list[FieldProblem] | None = Field(
        default=None,
        description="Absent unless there is more to say: for ``invalid_request`` every "
        "field's problem, for a typed error the field it is about.",
    )


class ErrorEnvelope(BaseModel):
    """Every failure's body, whatever its status."""

    error: ErrorBody


_FAILURE_DESCRIPTIONS: dict[int, str] = {
    400: "The body is not JSON (``malformed_json``), or the request is malformed in a way "
    "the route names (``invalid_last_event_id``).",
    401: "No valid credential: no ``Authorization: Bearer <token>`` (nor the console's "
    "sign-in), or one that is malformed, unknown, expired or revoked (``unauthorized``; the "
    "message says which).",
    403: "The caller's identity lacks the scope the route needs (``forbidden``; the message "
    "and ``details`` name it), or the server's authorize hook refused it what it asked "
    "(``forbidden``; ``details``: the ``action`` and the ``resource``'s kind), or a request "
    "that changes something was sent by a page of "
    "another site: its ``Origin`` is neither the server's own nor one it allows "
    "(``forbidden_origin``).",
    404: "Nothing by that name: an unknown agent, conversation, submission, approval or input.",
    408: "The body did not arrive in time (``request_timeout``).",
    409: "Conflicts with the state of things (the type says which: ``session_busy``, "
    "``dispatch_conflict``, ``approval_conflict``, ``input_conflict``, ``log_tampered``...).",
    410: "What the request names was removed by retention: records before a log's "
    "``log_truncated`` record (``seq_truncated``).",
    413: "The body is over the server's limit (``payload_too_large``).",
    415: "The request does not say ``Content-Type: application/json``, which every POST "
    "must, with a body or without one (``unsupported_media_type``).",
    421: "The ``Host`` is not one this server answers to: a loopback name, the address the "
    "connection came in on, or one it was told to allow (``misdirected_request``).",
    422: "A parameter or the body does not validate (``invalid_request``, with every problem "
    "in ``details``), or a typed refusal (``invalid_dispatch``, ``invalid_seq``, "
    "``invalid_cursor``, ``invalid_edit_args``, ``invalid_answer``...).",
    500: "The server's own failure: ``internal`` (the details are in the server's log) or a "
    "server-side error's own type.",
    501: "The store this server runs on does not offer what the request needs "
    "(``store_capability_missing``; the message names the capability).",
    503: "Try again later: the store is unavailable or the runtime is closing.",
}

Responses = dict[int | str, dict[str, Any]]
"""A route's (or a router's) ``responses=``: its documented answers by status."""

BODY_FAILURES = (400, 403, 408, 413, 415, 422)
"""What a route that reads a JSON body can answer before it runs (the Guard and parsing)."""
POST_FAILURES = (403, 415)
"""What a POST that takes no body can answer before it runs (the Guard)."""


def failures(*statuses: int) -> Responses:
    """The ``responses=`` of a route that can answer these statuses (500 always): each is
    the error envelope.

    Example::

        @router.get("/submissions/{id}", responses=failures(404, 422, 503))
    """
    return {
        status: {"model": ErrorEnvelope, "description": _FAILURE_DESCRIPTIONS[status]}
        for status in sorted({*statuses, 500})
    }


class ApiError(Exception):
    """An HTTP-level error with its own type and status."""

    def __init__(self, status: int, type_: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.details = details


def status_of(error: errors.TetherError) -> int:
    """The status of an error's own class, else of its nearest mapped base class (an
    application's own subclass of, say, ``TransientError`` answers like it)."""
    for kind in type(error).__mro__:
        status = _STATUS.get(kind)
        if status is not None:
            return status
    return 500


def internal_error_response() -> Response:
    """The envelope of an unexpected exception: nothing of it reaches the client."""
    return error_response(500, "internal", "internal server error; the server log has the details")


def error_response(status: int, type_: str, message: str, details: Any = None) -> Response:
    body: dict[str, Any] = {"type": type_, "message": message}
    if details is not None:
        body["details"] = details
    return json_response({"error": body}, status)


def json_response(
    content: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(content),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def _allowed_methods(request: Request) -> str:
    """Every method the routes on the request's path take (HEAD wherever GET is: the Guard
    answers it), sorted, as ``Allow`` lists them."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, BaseRoute) and route.matches(request.scope)[0] != Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(errors.TetherError)
    async def tether_error(request: Request, exc: errors.TetherError) -> Response:
        field = getattr(exc, "field", None)
        details: dict[str, Any] | None = {"field": field} if field else None
        if isinstance(exc, errors.Forbidden) and exc.scope is not None:
            details = {"scope": exc.scope}
        elif isinstance(exc, errors.Forbidden) and exc.action is not None:
            details = {"action": exc.action, "resource": exc.resource}
        status = status_of(exc)
        if status == 500:  # a defect on the server's side: worth its traceback, once
            logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(status, exc.code, str(exc), details)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return error_response(exc.status, exc.type, exc.message, exc.details)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        problems = [
            {
                "field": ".".join(str(p) for p in error.get("loc", ()) if p != "body"),
                "message": error.get("msg", ""),
            }
            for error in exc.errors()
        ]
        if any(error.get("type") == "json_invalid" for error in exc.errors()):
            return error_response(400, "malformed_json", "the body is not valid JSON", problems)
        return error_response(
            422, "invalid_request", problems[0]["message"] if problems else "invalid", problems
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        names = {
            # FastAPI answers 400 only when it cannot parse the body at all
            # (e.g. nesting deeper than the parser's recursion limit).
            400: "malformed_json",
            404: "not_found",
            405: "method_not_allowed",
            408: "request_timeout",
            413: "payload_too_large",
            415: "unsupported_media_type",
        }
        response = error_response(
            exc.status_code, names.get(exc.status_code, "http_error"), str(exc.detail)
        )
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route on the path; a path is often
            # several routes (one per method), and Allow must name them all.
            response.headers["Allow"] = _allowed_methods(request)
        return response

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        # Only reached without the Guard in front (it answers these itself); Starlette then
        # re-raises, and the server logs the traceback.
        return internal_error_response()
