"""The worker's JSON-lines protocol: envelope, errors, registry, encoding."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch
from conftest import Worker, fixture
from mkworker import memory, protocol
from mkworker.encode import NotReplayable, decode, encode, resolve_op, tensor_ids
from mkworker.server import Channel, Server

# --- over a real subprocess -------------------------------------------------------


def test_hello(worker):
    resp, _ = worker.request("hello")
    assert resp["ok"] is True and resp["v"] == 1
    r = resp["result"]
    assert r["protocol"] == 1
    assert r["torch"] == torch.__version__.split("+")[0]
    cuda = torch.cuda.is_available()
    assert r["device"] == (torch.cuda.get_device_name(0) if cuda else "cpu")
    assert {"hello", "capture", "shutdown"} <= set(r["methods"])
    if not torch.cuda.is_available():
        assert r["cuda"] is None and r["triton_interpret"] is True


def test_bad_json_and_unknown_method_keep_the_worker_alive(worker):
    worker.send_raw(b"{not json")
    resp = worker.read()
    assert resp["ok"] is False and resp["id"] is None
    assert resp["error"]["kind"] == "bad_request" and "invalid JSON" in resp["error"]["message"]
    worker.send_raw(b"[1, 2]")
    assert worker.read()["error"]["kind"] == "bad_request"
    worker.send_raw(b'{"v": 1, "id": 41, "method": "no_such_method"}')
    resp = worker.read()
    assert resp["id"] == 41 and resp["error"]["kind"] == "bad_request"
    assert "no_such_method" in resp["error"]["message"]
    worker.send_raw(b'{"v": 2, "id": 42, "method": "hello"}')
    resp = worker.read()
    assert resp["id"] == 42 and resp["error"]["kind"] == "bad_request"
    worker.send_raw(b'{"v": 1, "id": "s", "method": "capture", "params": []}')
    assert worker.read()["error"]["kind"] == "bad_request"
    resp, _ = worker.request("capture", {"file": "relative.py"})
    assert resp["error"]["kind"] == "bad_request"
    resp, _ = worker.request("capture", {"file": fixture("simple.py"), "batch": "two"})
    assert resp["error"]["kind"] == "bad_request"
    resp, _ = worker.request("hello")  # still answering, ids still matched
    assert resp["ok"] is True


def test_print_in_user_code_does_not_corrupt_the_protocol(worker):
    resp, progress = worker.request("capture", {"file": fixture("prints.py")})
    assert resp["ok"] is True, resp
    assert [n["op"] for n in resp["result"]["nodes"]] == ["torch.sigmoid"]
    assert all("fraction" in p["progress"] for p in progress)
    resp, _ = worker.request("capture", {"file": fixture("prints.py"), "class": "Reads"})
    assert resp["ok"] is True, resp
    assert [n["op"] for n in resp["result"]["nodes"]] == ["torch.tanh"]
    resp, _ = worker.request("hello")
    assert resp["ok"] is True


SYNTAX_ERROR = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x  # line 7: unclosed


def get_inputs():
    return [torch.randn(2, 3)]
"""


def test_user_errors_over_the_pipe(worker, tmp_path):
    bad = tmp_path / "syntax_error.py"
    bad.write_text(SYNTAX_ERROR)
    resp, _ = worker.request("capture", {"file": str(bad)})
    assert resp["error"]["kind"] == "syntax_error" and resp["error"]["line"] == 7, resp
    resp, _ = worker.request("capture", {"file": fixture("no_model.py")})
    assert resp["error"]["kind"] == "missing" and "Model" in resp["error"]["message"]
    resp, _ = worker.request("capture", {"file": fixture("forward_raises.py")})
    err = resp["error"]
    assert err["kind"] == "python_error" and err["line"] == 12, err
    assert "traceback" in err
    resp, _ = worker.request("capture", {"file": fixture("missing_file.py")})
    assert resp["error"]["kind"] == "import_error"


def test_shutdown_and_eof():
    w = Worker()
    resp, _ = w.request("shutdown")
    assert resp["ok"] is True
    assert w.proc.wait(timeout=30) == 0
    w.close()
    w = Worker()
    assert w.close() == 0  # EOF on stdin: clean exit


# --- in process ------------------------------------------------------------------


def _server() -> tuple[Server, io.StringIO]:
    out = io.StringIO()
    return Server(Channel(out)), out


def _lines(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_registry_and_progress(tmp_path):
    user = tmp_path / "user.py"
    user.write_text("def boom():\n    x = 1\n    raise ValueError('bad value')\n")
    namespace: dict = {}
    exec(compile(user.read_text(), str(user), "exec"), namespace)

    def method(params, progress):
        progress("half way", 0.5)
        if params.get("fail"):
            namespace["boom"]()
        if params.get("exit"):
            raise SystemExit(3)
        return {"echo": params["x"], "nan": math.nan}

    protocol.register("test_echo", method, replace=True)
    with pytest.raises(ValueError):
        protocol.register("test_echo", method)
    server, out = _server()
    assert server.handle(json.dumps({"id": 1, "method": "test_echo",
                                     "params": {"x": [1, 2]}}).encode())
    assert server.handle(json.dumps({"id": 2, "method": "test_echo",
                                     "params": {"x": 0, "fail": True,
                                                "file": str(user)}}).encode())
    assert server.handle(json.dumps({"id": 3, "method": "test_echo",
                                     "params": {"x": 0, "exit": True}}).encode())
    progress, ok, _, failed, _, exited = _lines(out)
    assert progress == {"v": 1, "id": 1, "progress": {"message": "half way", "fraction": 0.5}}
    assert ok["result"] == {"echo": [1, 2], "nan": "nan"}
    assert failed["error"]["kind"] == "python_error" and failed["error"]["line"] == 3
    assert "bad value" in failed["error"]["message"]
    assert exited["error"]["kind"] == "python_error" and "exit" in exited["error"]["message"]


def test_internal_errors_are_not_blamed_on_the_user():
    def method(params, progress):
        return [].pop()

    protocol.register("test_internal", method, replace=True)
    server, out = _server()
    server.handle(b'{"id": 9, "method": "test_internal"}')
    (resp,) = _lines(out)
    assert resp["id"] == 9 and resp["error"]["kind"] == "internal"
    assert "line" not in resp["error"]


def test_a_job_that_ran_out_of_memory_runs_again_with_the_caches_released(monkeypatch):
    kept = {"inputs": 2}
    calls = []

    def forget() -> int:
        n, kept["inputs"] = kept["inputs"], 0
        return n

    def method(params, progress):
        calls.append(dict(kept))
        short = kept["inputs"] or params.get("hog")
        if short and params.get("verdict"):  # a verification's answer: it ran out
            return {"status": "runtime_error", "error_kind": "oom"}
        if short:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        return {"ran": len(calls)}

    monkeypatch.setattr(memory, "_RELEASERS", {"test inputs": forget})
    protocol.register("test_memory", method, replace=True)
    server, out = _server()

    # The worker's own cache filled the memory: released, and the second run passes.
    assert server.handle(b'{"id": 1, "method": "test_memory"}')
    *progress, resp = _lines(out)
    assert calls == [{"inputs": 2}, {"inputs": 0}]
    assert resp["id"] == 1 and resp["result"] == {"ran": 2}
    assert [p["progress"]["message"] for p in progress] == [
        "out of memory with the worker's caches held: released them, running again"]

    # Nothing was kept: the candidate's own verdict stands, with no second run.
    calls.clear()
    out.truncate(0), out.seek(0)
    server.handle(b'{"id": 2, "method": "test_memory", "params": {"hog": true}}')
    (resp,) = _lines(out)
    assert len(calls) == 1 and resp["error"]["kind"] == "oom"

    # Something was kept, but the job runs out again: one more run only, still "oom".
    calls.clear()
    out.truncate(0), out.seek(0)
    kept["inputs"] = 1
    server.handle(b'{"id": 3, "method": "test_memory", "params": {"hog": true}}')
    assert len(calls) == 2 and _lines(out)[-1]["error"]["kind"] == "oom"

    # A result whose error_kind is "oom" counts as running out too.
    calls.clear()
    out.truncate(0), out.seek(0)
    server.handle(b'{"id": 4, "method": "test_memory", "params": {"verdict": true, "hog": true}}')
    assert len(calls) == 1 and _lines(out)[-1]["result"]["error_kind"] == "oom"
    kept["inputs"] = 3
    calls.clear()
    out.truncate(0), out.seek(0)
    server.handle(b'{"id": 5, "method": "test_memory", "params": {"verdict": true}}')
    assert calls == [{"inputs": 3}, {"inputs": 0}]
    assert _lines(out)[-1]["result"] == {"ran": 2}


def test_memory_nothing_can_release_restarts_the_worker_after_the_answer(monkeypatch):
    import os

    class Exited(Exception):
        pass

    def fake_exit(code: int) -> None:
        raise Exited(code)

    def method(params, progress):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(memory, "_RELEASERS", {})
    monkeypatch.setattr(memory, "stranded", lambda: "12.0 GiB stays allocated")
    monkeypatch.setattr(os, "_exit", fake_exit)
    protocol.register("test_stranded", method, replace=True)
    server, out = _server()
    with pytest.raises(Exited) as exited:
        server.handle(b'{"id": 7, "method": "test_stranded"}')
    assert exited.value.args == (71,)
    (resp,) = _lines(out)  # answered first
    assert resp["id"] == 7 and resp["error"]["kind"] == "oom"


def test_stranded_memory_is_measured_against_the_device(monkeypatch):
    class Props:
        total_memory = 80 << 30

    class Cuda:
        held = 0

        def memory_allocated(self) -> int:
            return self.held

        def current_device(self) -> int:
            return 0

        def get_device_properties(self, index: int) -> Props:
            return Props()

    class Torch:
        cuda = Cuda()

    fake = Torch()
    monkeypatch.setattr(memory, "_cuda", lambda: fake)
    fake.cuda.held = 19 << 30
    assert memory.stranded() is None
    fake.cuda.held = 72 << 30
    assert "72.0 GiB" in memory.stranded()


def test_the_worker_caches_register_their_releasers():
    from mkworker import replay, verify  # noqa: F401  (importing them registers)

    assert {"drawn inputs", "compiled references", "built models"} <= set(memory._RELEASERS)
    released = memory.release()
    assert released.freed_bytes == 0 or torch.cuda.is_initialized()
    assert memory.stranded() is None  # nothing held on the CPU


# --- argument encoding ------------------------------------------------------------


@pytest.mark.parametrize("value", [
    None, True, False, 0, -3, "mean", 0.5, 1e-05, 2.0, -0.0, math.inf, -math.inf,
    (1, 2), [1, (2, 3)], torch.Size([2, 3]), slice(None, -1, 2), slice(1, None, None),
    Ellipsis, torch.float16, torch.bfloat16, torch.int64, torch.channels_last,
    torch.strided, {"a": 1, "b": (2.0,)}, bool, int, float, complex,
])
def test_encoding_round_trips(value):
    enc = encode(value, lambda t: 0)
    text = json.dumps(enc, allow_nan=False)  # always valid JSON
    dec = decode(json.loads(text), lambda vid: None)
    assert dec == value and type(dec) is type(value)


def test_encoding_details():
    assert encode(2.0, id) == {"float": 2.0}
    assert encode(2, id) == 2
    assert encode(0.1, id) == 0.1
    assert encode(math.nan, id) == {"float": "nan"}
    assert math.isnan(decode({"float": "nan"}, id))
    assert encode(torch.device("cpu"), id) == {"device": "cpu"}
    assert decode({"device": "meta"}, id, device="cpu") == torch.device("cpu")
    t = torch.zeros(1)
    enc = encode([t, (t, 3)], lambda x: 7)
    assert enc == {"list": [{"t": 7}, {"tuple": [{"t": 7}, 3]}]}
    assert tensor_ids({"tuple": [{"t": 3}, {"t": 1}, {"t": 3}]}) == [3, 1]
    assert decode(enc, lambda vid: t) == [t, (t, 3)]
    assert "opaque" in encode(object(), id)
    with pytest.raises(NotReplayable):
        decode({"opaque": "<object>"}, id)
    with pytest.raises(NotReplayable):
        decode({"dtype": "no_such_dtype"}, id)
    # Python's scalar types as dtypes (`torch.ones(n, dtype=bool)`), nothing else
    assert encode(bool, id) == {"pytype": "bool"}
    assert "opaque" in encode(str, id) and "opaque" in encode(torch.Tensor, id)
    with pytest.raises(NotReplayable):
        decode({"pytype": "str"}, id)


def test_resolve_op():
    assert resolve_op("torch.nn.functional.gelu") is torch.nn.functional.gelu
    assert resolve_op("torch.Tensor.__add__") is torch.Tensor.__add__
    x = torch.arange(6.0).view(2, 3)
    assert torch.equal(resolve_op("torch.Tensor.T.__get__")(x), x.T)
    for bad in ("torch.no_such_op", "os.system; rm", "torch.float32"):
        with pytest.raises(NotReplayable):
            resolve_op(bad)
