"""`wattgpu serve`: MLflow's scoring app with a thin guard in front (an ASGI middleware).

MLflow's scoring server (``mlflow.pyfunc.scoring_server``) answers a POST without a
Content-Type with a 500, lets deeply nested JSON reach ``json.loads`` (RecursionError, 500),
reads bodies of any size, and puts stack traces, install paths and the whole request (as a
DataFrame repr) into its 400 bodies. ``Guard`` answers those cases itself and rewrites every error
the app returns into ``{"error_code": ..., "message": ...}`` of at most ``MAX_ERROR_BYTES``.
Successful answers pass through untouched. An error of the app's own (a 500) is logged with its
trace on the server's stderr, never sent.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import numpy as np
import pandas as pd

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOG = logging.getLogger(__name__)
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
# A query is {"dataframe_records": [{...}]} or {"dataframe_split": {"data": [[...]]}}: depth 3
# (4), and a model_config object adds its own: 7 for the deepest config.json of AIConfigurator's
# (Kimi-K3's: its text_config's quantization_config's groups).
DEFAULT_MAX_JSON_DEPTH = 12
MAX_ERROR_BYTES = 2048
# What /invocations reads (MLflow's CONTENT_TYPES), charset utf-8 only.
CONTENT_TYPES = ("application/json", "text/csv", "application/vnd.apache.parquet")
# Environment variables through which `wattgpu serve` hands its settings to each uvicorn worker.
ENV_MODEL_PATH = "WATTGPU_SERVE_MODEL_PATH"
ENV_MAX_BODY_BYTES = "WATTGPU_SERVE_MAX_BODY_BYTES"
ENV_MAX_JSON_DEPTH = "WATTGPU_SERVE_MAX_JSON_DEPTH"
ERROR_CODES = {
    400: "BAD_REQUEST",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    415: "UNSUPPORTED_MEDIA_TYPE",
    500: "INTERNAL_ERROR",
    504: "DEADLINE_EXCEEDED",
}


class Refused(Exception):
    """A request the guard answers itself."""

    def __init__(self, status: int, message: str, error_code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code or ERROR_CODES.get(status, "BAD_REQUEST")


def json_depth(body: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in ``body``, counting brackets inside strings too.

    An over-estimate only where strings hold unbalanced brackets, which no query has; the cheap
    count keeps a 30 MB body to tens of milliseconds.
    """
    if body.count(b"[") + body.count(b"{") <= 1:
        return body.count(b"[") + body.count(b"{")
    raw = np.frombuffer(body, dtype=np.uint8)
    step = (raw == ord("[")).view(np.int8) + (raw == ord("{")).view(np.int8)
    step -= (raw == ord("]")).view(np.int8) + (raw == ord("}")).view(np.int8)
    return int(np.cumsum(step, dtype=np.int32).max(initial=0))


_TRACE = re.compile(r"Traceback \(most recent call last\).*", re.DOTALL)
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+-]+){2,}[\\/]?")
_FAILED_TO_PREDICT = re.compile(r"^Failed to predict data .*?\nError: ", re.DOTALL)
_INPUT_ECHO = re.compile(r"\s*Input: .*", re.DOTALL)


def clean_message(message: str, limit: int = MAX_ERROR_BYTES - 200) -> str:
    """An error message without the echoed input, stack traces or file paths, cut to ``limit``.

    Our own messages fit (long lists are shortened where they are written); a longer one, from a
    library, is cut between words and ends in ``...``.
    """
    text = _FAILED_TO_PREDICT.sub("", message)
    text = _TRACE.sub("", _INPUT_ECHO.sub("", text))
    text = _PATH.sub("<path>", text)
    text = " ".join(text.split())
    encoded = text.encode()
    if len(encoded) > limit:
        head = encoded[: limit - 4].decode(errors="ignore")
        words = head.rsplit(" ", 1)[0] if " " in head else head
        text = words + " ..."
    return text or "request refused"


def error_body(error_code: str, message: str) -> bytes:
    """The JSON error body: ``{"error_code", "message"}``, at most ``MAX_ERROR_BYTES``."""
    body = json.dumps({"error_code": error_code, "message": clean_message(message)})
    return body.encode()


class Guard:
    """ASGI middleware in front of MLflow's scoring app (see the module docstring).

    Args:
        app: the scoring app.
        max_body_bytes: larger request bodies are refused with 400.
        max_json_depth: JSON nested deeper is refused with 400.

    """

    def __init__(
        self,
        app: App,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an /invocations request, pass it on, and rewrite an error answer."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            if scope["path"].rstrip("/") == "/invocations" and scope["method"] == "POST":
                receive = await self._checked(scope, receive)
            await self._forward(scope, receive, send)
        except Refused as exc:
            await _respond(send, exc.status, exc.error_code, str(exc))

    async def _checked(self, scope: Scope, receive: Receive) -> Receive:
        """Check headers and body; return a ``receive`` that replays the body read."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        mime = _content_type(headers.get("content-type"))
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            raise Refused(400, self._too_large())
        body = await self._read(receive)
        if mime == "application/json" and json_depth(body) > self.max_json_depth:
            raise Refused(
                400,
                f"JSON nested deeper than {self.max_json_depth} levels; a query needs 3 "
                "(and its model_config's own)",
            )
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay

    def _too_large(self) -> str:
        return f"request body larger than {self.max_body_bytes} bytes; send fewer rows per request"

    async def _read(self, receive: Receive) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Refused(400, "client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise Refused(400, self._too_large())
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app; hold back an error answer and send its clean JSON form instead."""
        held: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                held["status"] = message["status"]
            elif "status" in held:
                chunks.append(message.get("body", b""))
            else:
                held["forwarded"] = True
                await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except Exception as exc:  # an error of the app's: a clean answer, no trace
            if "forwarded" in held:
                raise  # a good answer had begun: nothing else can be sent any more
            if isinstance(exc, RecursionError):  # json.loads on nesting the count missed
                raise Refused(400, "JSON nested too deeply") from None
            LOG.exception("internal error answering %s %s", scope["method"], scope["path"])
            raise Refused(500, f"internal error ({type(exc).__name__})") from None
        if "status" in held:
            await _respond(send, held["status"], *_parse_error(held["status"], chunks))


def log_to_stderr(logger: logging.Logger) -> None:
    """Give ``logger`` a stderr handler unless a handler already takes its records.

    A model server configures logging for its own loggers only (uvicorn's, MLflow's): without
    this an error of ours would reach stderr through Python's last-resort handler, unlabelled.
    """
    if not logger.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


def _content_type(value: str | None) -> str:
    """The request's mime type, or ``Refused(415)`` if missing, unsupported or not UTF-8."""
    allowed = ", ".join(CONTENT_TYPES)
    if not value or not value.strip():
        raise Refused(415, f"missing Content-Type header; use one of {allowed}")
    mime, *parameters = [part.strip() for part in value.split(";")]
    if mime.lower() not in CONTENT_TYPES:
        raise Refused(415, f"unsupported Content-Type {mime[:60]!r}; use one of {allowed}")
    for parameter in parameters:
        key, _, setting = parameter.partition("=")
        if key.strip().lower() != "charset" or setting.strip().strip('"').lower() != "utf-8":
            raise Refused(
                415, f"unsupported Content-Type parameter {parameter[:60]!r}; only charset=utf-8"
            )
    return mime.lower()


def _parse_error(status: int, chunks: list[bytes]) -> tuple[str, str]:
    """(error code, message) of an error answer of the app (JSON from MLflow, or text)."""
    raw = b"".join(chunks)
    fallback = ERROR_CODES.get(status, "BAD_REQUEST")
    if status >= 500 and status != 504:
        return fallback, "internal error"
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return fallback, raw[:MAX_ERROR_BYTES].decode(errors="replace")
    if isinstance(payload, dict):
        message = payload.get("message", payload.get("detail", ""))
        return str(payload.get("error_code", fallback)), str(message)
    return fallback, str(payload)[:MAX_ERROR_BYTES]


async def _respond(send: Send, status: int, error_code: str, message: str) -> None:
    body = error_body(error_code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def create_app() -> App:
    """The guarded scoring app of the model at ``$WATTGPU_SERVE_MODEL_PATH`` (uvicorn factory).

    `wattgpu serve` sets the variables once and starts uvicorn, which calls this in each worker.
    """
    from mlflow.pyfunc import scoring_server

    log_to_stderr(LOG)
    model = scoring_server.load_model_with_mlflow_config(os.environ[ENV_MODEL_PATH])
    scoring_server.predictions_to_json = _fast_predictions_to_json(
        scoring_server.predictions_to_json
    )
    return Guard(
        scoring_server.init(model),
        max_body_bytes=int(os.environ.get(ENV_MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES)),
        max_json_depth=int(os.environ.get(ENV_MAX_JSON_DEPTH, DEFAULT_MAX_JSON_DEPTH)),
    )


def _fast_predictions_to_json(original: Callable[..., Any]) -> Callable[..., Any]:
    """MLflow's ``predictions_to_json`` for a frame, the same JSON at C speed.

    MLflow writes its answer with ``json.dump``, which always takes the pure-Python encoder,
    after ``DataFrame.to_dict``: three quarters of a 1,000-row request's time. The frame is turned
    into records of plain Python values here and written by ``json.dumps`` (the C encoder):
    the same text, float for float. Anything else goes to MLflow's own function.
    """

    def predictions_to_json(raw_predictions: Any, output: Any, metadata: Any = None) -> Any:
        if not isinstance(raw_predictions, pd.DataFrame) or metadata:
            return original(raw_predictions, output, metadata)
        columns = {str(c): raw_predictions[c].tolist() for c in raw_predictions.columns}
        rows = zip(*columns.values(), strict=True)
        records = [dict(zip(columns, values, strict=True)) for values in rows]
        output.write(json.dumps({"predictions": records}))
        return None

    return predictions_to_json
