#!/usr/bin/env python3
"""A scripted LLM provider on loopback for the C tests (no network).

Speaks OpenAI chat completions (POST /v1/chat/completions, any prefix
ending in /chat/completions) and Anthropic messages (POST .../v1/messages)
faithfully enough for the client: JSON and server-sent-event replies, usage
fields (streaming usage only when the OpenAI request asks for it with
stream_options.include_usage, as OpenAI does), error bodies, Retry-After.

    fake_llm.py SCRIPT.json      prints the port on the first stdout line

SCRIPT: {"replies": [STEP, ...]} consumed one per request, in arrival order
(a request after the last step gets HTTP 500 "script exhausted"). STEP keys
(all optional):
    match         a string or list of strings that must all occur in the
                  request's prompt (system + messages): the request takes the
                  first unused step that matches (steps without match fit any
                  request), so concurrent agents get their own replies
    status        HTTP status (200)
    text          reply text
    usage         {"in": N, "out": M}; null: send no usage at all
    chunk         characters per streamed text event (8)
    delay_s       sleep before answering (slow replies, timeouts, concurrency)
    chunk_delay_s sleep between streamed events
    truncate      stream: stop before the end marker and close; JSON: announce
                  a longer Content-Length than sent
    malformed     send this raw text as the (JSON or event) body
    headers       extra response headers, e.g. {"Retry-After": "1"}
    error_message message in the error body of a non-200 reply
    echo_key      put the request's key into the error message (redaction test)
    stream_error  Anthropic/OpenAI in-band error event after the first chunk
    model         model name reported (default: the requested one)

GET /_log returns {"requests": [{path, headers, body, t, step}], "max_concurrent": N}
(step: the index of the step that answered, or null).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOCK = threading.Lock()
STATE: dict[str, Any] = {"steps": [], "used": set(), "log": [], "active": 0, "max_active": 0}


def prompt_text(req: Any) -> str:
    if not isinstance(req, dict):
        return ""
    parts = [req.get("system") if isinstance(req.get("system"), str) else ""]
    for m in req.get("messages") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            parts.append(m["content"])
    return "\n".join(parts)


def fits(step: dict[str, Any], text: str) -> bool:
    want = step.get("match")
    if want is None:
        return True
    return all(w in text for w in ([want] if isinstance(want, str) else want))


def next_step(req: Any = None, entry: dict[str, Any] | None = None) -> dict[str, Any] | None:
    text = prompt_text(req)
    with LOCK:
        used = STATE["used"]
        for i, step in enumerate(STATE["steps"]):
            if i not in used and fits(step, text):
                used.add(i)
                if entry is not None:
                    entry["step"] = i
                return step
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the C test prints what matters

    def do_GET(self) -> None:
        if self.path != "/_log":
            self.send_error(404)
            return
        with LOCK:
            data = json.dumps({"requests": STATE["log"], "max_concurrent": STATE["max_active"]})
        body = data.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        with LOCK:
            STATE["active"] += 1
            STATE["max_active"] = max(STATE["max_active"], STATE["active"])
        try:
            self.handle_post(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with LOCK:
                STATE["active"] -= 1

    def handle_post(self, raw: bytes) -> None:
        anthropic = self.path.endswith("/v1/messages")
        openai = self.path.endswith("/chat/completions")
        try:
            req = json.loads(raw)
        except ValueError:
            req = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        entry: dict[str, Any] = {
            "path": self.path,
            "headers": headers,
            "body": req,
            "t": time.time(),
            "step": None,
        }
        with LOCK:
            STATE["log"].append(entry)
        if not (anthropic or openai):
            return self.json_reply(
                404, {"error": {"type": "not_found", "message": "no such endpoint"}}
            )
        problem = self.validate(req, headers, anthropic)
        if problem:
            return self.json_reply(
                400, {"error": {"type": "invalid_request_error", "message": problem}}
            )
        step = next_step(req, entry)
        if step is None:
            return self.json_reply(
                500, {"error": {"type": "server_error", "message": "script exhausted"}}
            )
        time.sleep(float(step.get("delay_s", 0)))
        status = int(step.get("status", 200))
        extra = step.get("headers", {})
        if status != 200:
            msg = step.get("error_message", "scripted failure")
            if step.get("echo_key"):
                key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix(
                    "Bearer "
                )
                msg = f"Incorrect API key provided: {key}"
            kind = "rate_limit_error" if status == 429 else "api_error"
            return self.json_reply(status, {"error": {"type": kind, "message": msg}}, extra)
        model = step.get("model", req.get("model"))
        if req.get("stream"):
            self.stream(step, req, model, anthropic, extra)
        else:
            self.whole(step, model, anthropic, extra)

    @staticmethod
    def validate(req: Any, headers: dict[str, str], anthropic: bool) -> str | None:
        if not isinstance(req, dict) or not isinstance(req.get("model"), str):
            return "body must be a JSON object with a model"
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return "messages must be a non-empty list"
        for m in msgs:
            if m.get("role") not in ("user", "assistant", "system") or not isinstance(
                m.get("content"), str
            ):
                return "bad message"
        if anthropic:
            if not isinstance(req.get("max_tokens"), int):
                return "max_tokens: Field required"
            if "anthropic-version" not in headers:
                return "anthropic-version header is required"
            if any(m["role"] == "system" for m in msgs):
                return "system belongs in the top-level system field"
        return None

    def json_reply(
        self,
        status: int,
        obj: Any,
        extra: dict[str, str] | None = None,
        raw: str | None = None,
        truncate: bool = False,
    ) -> None:
        body = (raw if raw is not None else json.dumps(obj)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) + (100 if truncate else 0)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if truncate:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if truncate:
            self.close_connection = True

    def whole(
        self, step: dict[str, Any], model: str, anthropic: bool, extra: dict[str, str]
    ) -> None:
        text = step.get("text", "")
        usage = step.get("usage", {"in": 10, "out": 5})
        if anthropic:
            obj: dict[str, Any] = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
            }
            if usage is not None:
                obj["usage"] = {"input_tokens": usage["in"], "output_tokens": usage["out"]}
        else:
            obj = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
            }
            if usage is not None:
                obj["usage"] = {
                    "prompt_tokens": usage["in"],
                    "completion_tokens": usage["out"],
                    "total_tokens": usage["in"] + usage["out"],
                }
        self.json_reply(
            200, obj, extra, raw=step.get("malformed"), truncate=bool(step.get("truncate"))
        )

    def send_event(self, data: str, event: str | None = None) -> None:
        out = (
            (f"event: {event}\n" if event else "")
            + "".join(f"data: {line}\n" for line in data.split("\n"))
            + "\n"
        )
        self.wfile.write(out.encode())
        self.wfile.flush()

    def stream(
        self,
        step: dict[str, Any],
        req: dict[str, Any],
        model: str,
        anthropic: bool,
        extra: dict[str, str],
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True
        text = step.get("text", "")
        n = max(1, int(step.get("chunk", 8)))
        pieces = [text[i : i + n] for i in range(0, len(text), n)]
        usage = step.get("usage", {"in": 10, "out": 5})
        pause = float(step.get("chunk_delay_s", 0))
        truncate = bool(step.get("truncate"))
        if step.get("malformed") is not None:
            self.wfile.write(b": keep-alive comment\n\n")
            self.send_event(step["malformed"], "content_block_delta" if anthropic else None)
            return
        if anthropic:
            start_usage = {"input_tokens": usage["in"], "output_tokens": 1} if usage else {}
            self.send_event(
                json.dumps(
                    {
                        "type": "message_start",
                        "message": {
                            "id": "msg_1",
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": [],
                            "usage": start_usage,
                        },
                    }
                ),
                "message_start",
            )
            self.send_event(
                json.dumps(
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    }
                ),
                "content_block_start",
            )
            self.send_event(json.dumps({"type": "ping"}), "ping")
        for i, p in enumerate(pieces):
            if truncate and i >= max(1, len(pieces) // 2):
                self.wfile.write(b'data: {"choices": [{"delta": {"content": "cut')  # half an event
                self.wfile.flush()
                return
            if anthropic:
                self.send_event(
                    json.dumps(
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": p},
                        }
                    ),
                    "content_block_delta",
                )
            else:
                self.send_event(
                    json.dumps(
                        {
                            "id": "c1",
                            "object": "chat.completion.chunk",
                            "model": model,
                            "choices": [
                                {"index": 0, "delta": {"content": p}, "finish_reason": None}
                            ],
                        }
                    )
                )
            if i == 0 and step.get("stream_error"):
                err = {"type": "overloaded_error", "message": "Overloaded"}
                if anthropic:
                    self.send_event(json.dumps({"type": "error", "error": err}), "error")
                else:
                    self.send_event(
                        json.dumps({"error": {"type": "server_error", "message": "Overloaded"}})
                    )
                return
            time.sleep(pause)
        if truncate:
            return
        if anthropic:
            self.send_event(
                json.dumps({"type": "content_block_stop", "index": 0}), "content_block_stop"
            )
            delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
            if usage:
                delta["usage"] = {"output_tokens": usage["out"]}
            self.send_event(json.dumps(delta), "message_delta")
            self.send_event(json.dumps({"type": "message_stop"}), "message_stop")
        else:
            self.send_event(
                json.dumps(
                    {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "model": model,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    }
                )
            )
            if usage and (req.get("stream_options") or {}).get("include_usage"):
                self.send_event(
                    json.dumps(
                        {
                            "id": "c1",
                            "object": "chat.completion.chunk",
                            "model": model,
                            "choices": [],
                            "usage": {
                                "prompt_tokens": usage["in"],
                                "completion_tokens": usage["out"],
                                "total_tokens": usage["in"] + usage["out"],
                            },
                        }
                    )
                )
            self.send_event("[DONE]")


def main() -> None:
    with open(sys.argv[1]) as f:
        STATE["steps"] = json.load(f)["replies"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
