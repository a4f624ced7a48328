"""The error envelope: every failure answers ``{"error": {"type", "message", "details"?}}``."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from tether import errors

__all__ = ("ApiError", "error_response", "install_error_handlers", "json_response", "status_of")

# Most specific first: the first class an error is an instance of decides.
_STATUS: list[tuple[type[errors.TetherError], int]] = [
    (errors.InvalidDispatch, 422),
    (errors.SeqOutOfRange, 422),
    (errors.RecordDecodeError, 422),
    (errors.CanonicalizationError, 422),
    (errors.NotFound, 404),
    (errors.DispatchConflict, 409),
    (errors.SessionBusy, 409),
    (errors.NoRunInFlight, 409),
    (errors.ApprovalConflict, 409),
    (errors.InvalidApproval, 409),
    (errors.ApprovalBlocked, 409),
    (errors.SessionExists, 409),
    (errors.Conflict, 409),
    (errors.Fenced, 409),
    (errors.LogTampered, 409),
    (errors.RuntimeClosed, 503),
    (errors.StoreUnavailable, 503),
]


class ApiError(Exception):
    """An HTTP-level error with its own type and status."""

    def __init__(self, status: int, type_: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.details = details


def status_of(error: errors.TetherError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400 if isinstance(error, ValueError) else 500


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


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(errors.TetherError)
    async def tether_error(request: Request, exc: errors.TetherError) -> Response:
        field = getattr(exc, "field", None)
        details = {"field": field} if field else None
        return error_response(status_of(exc), exc.code, str(exc), details)

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
            413: "payload_too_large",
            415: "unsupported_media_type",
        }
        return error_response(
            exc.status_code, names.get(exc.status_code, "http_error"), str(exc.detail)
        )
