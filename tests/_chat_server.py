"""A local HTTP server speaking the OpenAI chat-completions / completions protocols (as vLLM's
OpenAI-compatible server does, prompt logprobs included) and a small Anthropic messages
endpoint. Started by the tests on 127.0.0.1; no network.

The model name picks the behaviour:
  "tool-caller"  a tool call to the first tool (required params = "ORD-1234") until a tool
                 result is in the thread, then a text reply quoting the result
  "echo"         "You said: <last user text>"
  "flaky-429"    429 (Retry-After: 0) on the first 2 requests, then "echo"
  "flaky-500"    500 on the first request, then "echo"
  "always-429"   429 forever
  "slow"         sleeps `server.slow_seconds`, then "echo"
  "always-401"   401 forever (a wrong API key); "always-403" the same with 403 (not listed by default)
  "always-500"   500 forever (a dead endpoint; not listed by default)
  "dies-after"   "echo" for the first `server.die_after` requests, then 500 forever (not listed by default)
  "bad-json"     a tool call whose arguments are not JSON
  "length"       a reply cut at max_tokens (finish_reason "length")
  "leaver"       "[leaves]"
  "chatty"       "Sure, it's ORD-1234." (a user model)
  "grader"       a judge: '{"reward": 1, "reason": ...}' when the last user text mentions
                 ORD-1234, else reward 0
  "writer"       a situation writer: a JSON array of the N messages the card asks for, each
                 naming the card's record id
  "half-writer"  one good message and one that looks like a tool call
  "slow-writer"  "writer" after sleeping `server.slow_seconds`

GET /version answers {"version": server.version} when that is set (vLLM's route), else 404;
with `server.trickle_seconds` set, that answer comes one byte at a time, that many seconds apart
(a server that holds a client for as long as it likes).
GET /v1/models lists `server.models` (vLLM's shape: {"object": "list", "data": [{"id", ...}]}),
by default every behaviour above in this order ("echo" first); `ChatServer(models=[])` lists none.
Every request is kept in `server.requests` as (path, body) (a GET's body is {}), every
Authorization header in `server.authorizations`; `server.max_in_flight` is the most POST
requests answered at once.

Tokens: the text split by the regex \\S+|\\s+ ; token t has logprob -0.05 * (1 + len(t.strip()) % 7).
The chat template: "<|role|>\\n" + content + "\\n" per message; add_generation_prompt appends
"<|assistant|>\\n"; continue_final_message leaves the last message open (no trailing "\\n").
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_TOKEN = re.compile(r"\S+|\s+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text or "")


def token_logprob(token: str) -> float:
    return -0.05 * (1 + len(token.strip()) % 7)


def render(messages: list[dict], add_generation_prompt: bool = True, continue_final_message: bool = False) -> str:
    parts = []
    for position, message in enumerate(messages):
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if message.get("tool_calls"):
            content += json.dumps([c["function"] for c in message["tool_calls"]])
        last = position == len(messages) - 1
        parts.append(f"<|{message.get('role')}|>\n{content}" + ("" if last and continue_final_message else "\n"))
    text = "".join(parts)
    if add_generation_prompt and not continue_final_message:
        text += "<|assistant|>\n"
    return text


DEFAULT_MODELS = ("echo", "tool-caller", "flaky-429", "flaky-500", "always-429", "slow", "bad-json", "length", "leaver", "chatty", "grader", "writer", "half-writer")


class ChatServer:
    def __init__(self, models=DEFAULT_MODELS) -> None:
        self.models = list(models)
        self.requests: list[tuple[str, dict]] = []
        self.authorizations: list[str | None] = []
        self.counts: dict[str, int] = {}
        self.slow_seconds = 2.0
        self.die_after = 10  # requests "dies-after" answers before it fails for good
        self.version: str | None = None  # when set, GET /version answers {"version": ...} (as vLLM's does)
        self.trickle_seconds: float | None = None  # when set, /version's answer trickles byte by byte
        self.in_flight = 0
        self.max_in_flight = 0  # the most POST requests being answered at once
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                with server.lock:
                    server.requests.append((self.path, {}))
                    server.authorizations.append(self.headers.get("authorization"))
                    key = f"GET {self.path}"
                    server.counts[key] = server.counts.get(key, 0) + 1
                if self.path == "/version" and server.version is not None and server.trickle_seconds:
                    self.trickle(json.dumps({"version": server.version}).encode(), server.trickle_seconds)
                elif self.path == "/version" and server.version is not None:
                    self.reply(200, {"version": server.version}, {})
                elif self.path.rstrip("/").endswith("/models"):
                    listed = [{"id": name, "object": "model", "created": 0, "owned_by": "test"} for name in server.models]
                    self.reply(200, {"object": "list", "data": listed}, {})
                else:
                    self.reply(404, {"error": {"message": f"no route GET {self.path}"}}, {})

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append((self.path, body))
                    server.authorizations.append(self.headers.get("authorization"))
                    key = f"{self.path}:{body.get('model')}"
                    server.counts[key] = server.counts.get(key, 0) + 1
                    count = server.counts[key]
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    status, payload, headers = server.answer(self.path, body, count)
                except Exception as error:  # a bug in the fake server shows as a 500 with the message
                    status, payload, headers = 500, {"error": {"message": repr(error)}}, {}
                finally:
                    with server.lock:
                        server.in_flight -= 1
                self.reply(status, payload, headers)

            def trickle(self, data, seconds):
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(seconds)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def reply(self, status, payload, headers):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "ChatServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- behaviours ------------------------------------------------------------------------

    def _failure(self, model: str, count: int):
        if model == "always-429" or (model == "flaky-429" and count <= 2):
            return 429, {"error": {"message": "rate limited", "type": "rate_limit"}}, {"retry-after": "0"}
        if model == "flaky-500" and count <= 1:
            return 500, {"error": {"message": "boom", "type": "server_error"}}, {}
        if model in ("always-401", "always-403"):
            status = int(model[-3:])
            return status, {"error": {"message": "invalid api key", "type": "authentication_error"}}, {}
        if model == "always-500" or (model == "dies-after" and count > self.die_after):
            return 500, {"error": {"message": "backend down", "type": "server_error"}}, {}
        if model in ("slow", "slow-writer"):
            time.sleep(self.slow_seconds)
        return None

    def answer(self, path: str, body: dict, count: int):
        model = body.get("model", "")
        failure = self._failure(model, count)
        if failure is not None:
            return failure
        if model == "dies-after":
            body = {**body, "model": "echo"}
        if path.endswith("/chat/completions"):
            return self.chat(body)
        if path.endswith("/completions"):
            return self.completions(body)
        if path.endswith("/messages"):
            return self.anthropic(body)
        return 404, {"error": {"message": f"no route {path}"}}, {}

    def _decide(self, model: str, messages: list[dict], tools: list[dict], tool_result_seen: bool) -> tuple[str | None, list[dict]]:
        if model == "tool-caller" and tools and not tool_result_seen:
            tool = tools[0]
            function = tool.get("function", tool)
            schema = function.get("parameters") or function.get("input_schema") or {}
            arguments = {name: "ORD-1234" for name in schema.get("required", [])}
            return None, [{"name": function["name"], "arguments": json.dumps(arguments)}]
        if model == "tool-caller":
            last = next((m for m in reversed(messages) if m.get("role") in ("tool", "user")), {})
            content = last.get("content")
            if isinstance(content, list):
                content = json.dumps(content)
            return f"Done: {str(content)[:40]}", []
        if model == "bad-json":
            return None, [{"name": (tools[0].get("function", tools[0]))["name"] if tools else "x", "arguments": "{not json"}]
        if model == "leaver":
            return "[leaves]", []
        if model == "chatty":
            return "Sure, it's ORD-1234.", []
        if model == "grader":
            last_user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
            passed = "ORD-1234" in str(last_user.get("content"))
            return json.dumps({"reward": int(passed), "reason": "names ORD-1234" if passed else "no order id"}), []
        if model == "length":
            return "This reply is cut off because it ran", []
        if model in ("writer", "half-writer", "slow-writer"):
            # a situation writer: a JSON array of the asked number of first messages, each
            # naming the card's record id; "half-writer" delivers one good message and one
            # that looks like a tool call, whatever was asked
            card = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
            asked = re.search(r"Write (\d+) different", card)
            record = re.search(r"The record id they hold: (\S+)", card)
            n = int(asked.group(1)) if asked else 1
            ref = record.group(1) if record else "my booking"
            if model == "half-writer":
                return "Here you go:\n" + json.dumps([f"Hello, I need help with {ref} today.", '{"name": "cancel", "arguments": {}}']), []
            return json.dumps([f"Hi there, question {i + 1} about {ref}: can you sort it out?" for i in range(n)]), []
        last_user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        content = last_user.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return f"You said: {content}", []

    def chat(self, body: dict):
        messages = body.get("messages", [])
        tools = body.get("tools") or []
        model = body.get("model", "")
        if body.get("prompt_logprobs") is not None or body.get("continue_final_message"):
            text = render(messages, add_generation_prompt=body.get("add_generation_prompt", True), continue_final_message=bool(body.get("continue_final_message")))
        else:
            text = render(messages, add_generation_prompt=body.get("add_generation_prompt", True))
        prompt_tokens = tokenize(text)
        content, calls = self._decide(model, messages, tools, any(m.get("role") == "tool" for m in messages))
        generated = content if content is not None else json.dumps(calls)
        out_tokens = tokenize(generated)
        finish = "length" if model == "length" else ("tool_calls" if calls else "stop")
        message: dict = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function", "function": call} for i, call in enumerate(calls)
            ]
        choice: dict = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [{"token": t, "logprob": token_logprob(t), "bytes": list(t.encode()), "top_logprobs": []} for t in out_tokens]
            }
        payload = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": f"{model}-served",
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_tokens), "completion_tokens": len(out_tokens), "total_tokens": len(prompt_tokens) + len(out_tokens)},
        }
        if body.get("prompt_logprobs") is not None:
            payload["prompt_logprobs"] = [None] + [
                {str(1000 + i): {"logprob": token_logprob(t), "rank": 1, "decoded_token": t}} for i, t in enumerate(prompt_tokens[1:], start=1)
            ]
        return 200, payload, {}

    def completions(self, body: dict):
        prompt = body.get("prompt", "")
        tokens = tokenize(prompt)
        generated = ["."]
        text = (prompt if body.get("echo") else "") + "".join(generated)
        logprobs = None
        if body.get("logprobs") is not None:
            shown = (tokens if body.get("echo") else []) + generated
            offsets = []
            position = 0 if body.get("echo") else len(prompt)
            for token in shown:
                offsets.append(position)
                position += len(token)
            values = [token_logprob(t) for t in shown]
            if body.get("echo") and values:
                values[0] = None  # the first prompt token has no context, as in vLLM / OpenAI
            logprobs = {"tokens": shown, "token_logprobs": values, "text_offset": offsets, "top_logprobs": None}
        payload = {
            "id": "cmpl-test",
            "object": "text_completion",
            "created": 0,
            "model": f"{body.get('model')}-served",
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1},
        }
        return 200, payload, {}

    def anthropic(self, body: dict):
        messages = body.get("messages", [])
        tools = body.get("tools") or []
        model = body.get("model", "")
        seen = any(isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"]) for m in messages)
        content, calls = self._decide(model, messages, tools, seen)
        blocks = []
        if content is not None:
            blocks.append({"type": "text", "text": content})
        for i, call in enumerate(calls):
            blocks.append({"type": "tool_use", "id": f"toolu_{i}", "name": call["name"], "input": json.loads(call["arguments"])})
        stop = "max_tokens" if model == "length" else ("tool_use" if calls else "end_turn")
        payload = {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": f"{model}-served",
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": len(tokenize(json.dumps(messages))), "output_tokens": len(tokenize(content or json.dumps(calls)))},
        }
        return 200, payload, {}
