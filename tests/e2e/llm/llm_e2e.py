#!/usr/bin/env python3
"""End-to-end runs of `mkevolve evolve --proposer llm` against scripted LLM
servers on loopback (tests/llm/fake_llm.py): no network, CPU only (Triton
interpreter), small budgets.

    llm_e2e.py [SCENARIO...]     scenarios: openai, anthropic, monolithic, cli

Each scenario starts its own fake server, runs the real CLI, then checks
what came out (the --json summary, run.jsonl, the composed ModelNew, the
server's request log). Prints one line per failed check and a final
"N passed, M failed"; exits 1 when anything failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import kernels

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
FAKE = ROOT / "tests" / "llm" / "fake_llm.py"
CONV = ROOT / "examples" / "conv_bias_relu.py"
TWO_LINEAR = HERE / "two_linear.py"
KEY = "sk-e2e-SECRET-4b1d2c3e9f0a7766"
MODEL = "fake-coder-1"
TIMEOUT_S = 4.0  # per attempt (the config below); slow steps sleep longer

KW = "You write Triton kernels that compute exactly"  # kernel_writer.txt
REPAIR = "fixing a Triton kernel that failed verification"  # repairer.txt
OPTIMISE = "making a correct Triton kernel faster"  # optimiser.txt
CONV_SK = "Subkernel `conv2d_add_mul_gelu`"

passed = 0
failed = 0


def check(cond: bool, what: str) -> bool:
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}", flush=True)
    return cond


def mkevolve_bin() -> str:
    env = os.environ.get("MKEVOLVE_BIN")
    if env:
        return env
    for b in ("build-asan", "build"):
        p = ROOT / b / "mkevolve"
        if p.exists():
            return str(p)
    sys.exit("llm_e2e: no mkevolve binary (set MKEVOLVE_BIN)")


def base_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
        and not k.endswith(("_API_KEY", "_BASE_URL"))
    }
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    env["TRITON_INTERPRET"] = "1"
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    return env


class FakeServer:
    """tests/llm/fake_llm.py with a script; /_log read back after the run."""

    def __init__(self, steps: list[dict[str, Any]], tmp: Path) -> None:
        self.steps = steps
        script = tmp / f"script_{int(time.time() * 1e6)}.json"
        script.write_text(json.dumps({"replies": steps}))
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE), str(script)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline().strip())
        self.base = f"http://127.0.0.1:{self.port}"

    def log(self) -> dict[str, Any]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.base + "/_log", timeout=10) as r:
            return json.loads(r.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def prompt_of(req: dict[str, Any]) -> str:
    body = req.get("body") or {}
    parts = [body.get("system") or ""]
    parts += [m.get("content", "") for m in body.get("messages", [])]
    return "\n".join(p for p in parts if isinstance(p, str))


def reported_usage(step: dict[str, Any]) -> tuple[int, int]:
    """Tokens the server reported for a step (what the ledger must count)."""
    if int(step.get("status", 200)) != 200 or step.get("truncate") or "malformed" in step:
        return 0, 0
    if float(step.get("delay_s", 0)) >= TIMEOUT_S or step.get("usage", {}) is None:
        return 0, 0
    u = step.get("usage", {"in": 10, "out": 5})
    return int(u["in"]), int(u["out"])


def usage_totals(server: FakeServer, log: dict[str, Any]) -> tuple[int, int]:
    tin = tout = 0
    for r in log["requests"]:
        if r.get("step") is not None:
            i, o = reported_usage(server.steps[r["step"]])
            tin += i
            tout += o
    return tin, tout


def run_cli(
    args: list[str], env: dict[str, str], limit_s: float = 170
) -> subprocess.CompletedProcess[str]:
    t0 = time.time()
    p = subprocess.run(
        [mkevolve_bin(), *args], env=env, capture_output=True, text=True, timeout=limit_s
    )
    print(
        f"  mkevolve {' '.join(args[:2])} ... exit {p.returncode} in {time.time() - t0:.1f}s",
        flush=True,
    )
    if p.returncode not in (0, 1, 2):
        print(p.stderr[-3000:])
    return p


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def no_key_anywhere(p: subprocess.CompletedProcess[str], workdir: Path, extra: list[Path]) -> None:
    check(KEY not in p.stdout, "the API key is not in stdout")
    check(KEY not in p.stderr, "the API key is not in stderr")
    files = [f for f in workdir.rglob("*") if f.is_file()] + [f for f in extra if f.exists()]
    check(len(files) > 0, "the run wrote files")
    leaked = [str(f) for f in files if KEY in f.read_text(errors="replace")]
    check(not leaked, f"the API key is in no run file (found in {leaked})")


def ledger_adds_up(ledger: dict[str, Any], server: FakeServer, log: dict[str, Any]) -> None:
    tin, tout = usage_totals(server, log)
    total = ledger.get("total", {})
    check(
        total.get("tokens_in") == tin,
        f"ledger tokens_in {total.get('tokens_in')} == server's {tin}",
    )
    check(
        total.get("tokens_out") == tout,
        f"ledger tokens_out {total.get('tokens_out')} == server's {tout}",
    )
    check(total.get("estimated_calls") == 0, "every call's usage came from the provider")
    for group in ("by_agent", "by_subkernel", "by_model"):
        g = ledger.get(group, {})
        check(sum(u["tokens_in"] for u in g.values()) == tin, f"{group} sums to the total (in)")
        check(sum(u["tokens_out"] for u in g.values()) == tout, f"{group} sums to the total (out)")
        check(sum(u["calls"] for u in g.values()) == total.get("calls"), f"{group} sums calls")
    calls = ledger.get("calls", [])
    check(len(calls) == total.get("calls"), "one call record per call")
    check(sum(c["tokens_in"] for c in calls) == tin, "call records sum to the total")


def llm_config(tmp: Path, server: FakeServer, **extra: Any) -> Path:
    cfg = {
        "provider": "openai",
        "model": "overridden-by-the-flag",
        "base_url": "http://127.0.0.1:9/v1",  # overridden by --base-url
        "api_key_env": "NOT_THE_VARIABLE",  # overridden by --api-key-env
        "timeout_s": TIMEOUT_S,
        "stall_timeout_s": 3,
        "max_retries": 2,
        "backoff_initial_s": 0.1,
        "backoff_max_s": 2,
        "max_concurrency": 2,
        "max_tokens": 4096,
        "prices": {"fake-coder-*": {"input_per_mtok": 3, "output_per_mtok": 15}},
    }
    cfg.update(extra)
    path = tmp / f"llm_{int(time.time() * 1e6)}.json"
    path.write_text(json.dumps(cfg))
    return path


def search_args(
    workdir: Path, cache: Path, out: Path, beam: int, depth: int, budget: int
) -> list[str]:
    return [
        "--device",
        "cpu",
        "--beam",
        str(beam),
        "--depth",
        str(depth),
        "--budget",
        str(budget),
        "--trials",
        "2",
        "--seed",
        "0",
        "--cache-dir",
        str(cache),
        "--workdir",
        str(workdir),
        "-o",
        str(out),
        "--json",
        "-q",
    ]


def summary_of(p: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        return json.loads(p.stdout)
    except ValueError:
        print(p.stdout[-2000:], p.stderr[-3000:])
        return {}


def chosen_variant(sk: dict[str, Any]) -> dict[str, Any]:
    return sk["variants"][sk["chosen"]] if sk.get("variants") else {}


# ---------------------------------------------------------------- scenarios


def scenario_openai(tmp: Path, cache: Path) -> None:
    """Modular run on conv_bias_relu through the OpenAI protocol: 429, a
    truncated stream, a wrong kernel, a REPAIR, a reply without code, a slow
    reply past the timeout, two right kernels, an Optimiser call failing with
    500s that echo the key."""
    print("scenario openai: examples/conv_bias_relu.py, modular", flush=True)
    kw = [KW, CONV_SK]
    rep = [REPAIR, CONV_SK]
    opt = [OPTIMISE, CONV_SK]
    steps: list[dict[str, Any]] = [
        {"match": kw, "status": 429, "headers": {"Retry-After": "1"}},
        {
            "match": kw,
            "text": kernels.CONV_REPLY_WRONG,
            "truncate": True,
            "usage": {"in": 7, "out": 7},
        },
        {
            "match": kw,
            "text": kernels.CONV_REPLY_WRONG,
            "usage": {"in": 1500, "out": 400},
            "chunk": 64,
            "chunk_delay_s": 0.01,
        },
        {"match": rep, "text": kernels.NO_CODE, "usage": {"in": 1800, "out": 60}},
        {"match": rep, "text": kernels.CONV_REPLY_REPAIRED, "delay_s": TIMEOUT_S + 2},
        {"match": rep, "text": kernels.CONV_REPLY_REPAIRED, "usage": {"in": 2000, "out": 900}},
        {"match": opt, "status": 500, "echo_key": True},
        {"match": opt, "status": 500, "echo_key": True},
        {"match": opt, "status": 500, "echo_key": True},
    ]
    server = FakeServer(steps, tmp)
    try:
        work, out = tmp / "openai", tmp / "openai_ModelNew.py"
        env = base_env()
        env["MK_E2E_KEY"] = KEY
        args = [
            "evolve",
            str(CONV),
            "--proposer",
            "llm",
            "--llm-config",
            str(llm_config(tmp, server)),
            "--model",
            MODEL,
            "--base-url",
            server.base + "/v1",
            "--api-key-env",
            "MK_E2E_KEY",
            *search_args(work, cache, out, beam=1, depth=3, budget=8),
        ]
        p = run_cli(args, env)
        log = server.log()
    finally:
        server.close()
    s = summary_of(p)
    check(p.returncode == 0, f"openai run exits 0 (stderr: {p.stderr[-600:]})")
    check(s.get("verified") is True, "the composed ModelNew is verified as a whole")
    check(s.get("mode") == "modular", "mode is modular")
    sks = s.get("subkernels", [])
    check(len(sks) == 1, "conv_bias_relu is one subkernel")
    if sks:
        v = chosen_variant(sks[0])
        check(
            v.get("origin") == f"llm:{MODEL}", f"chosen variant is from the LLM ({v.get('origin')})"
        )
        check(v.get("status") == "ok", "chosen variant verified")
        check(
            v.get("name", "").startswith("fused_epilogue_fixed"), "chosen variant is a repaired one"
        )
        statuses = {x["name"]: x["status"] for x in sks[0]["variants"]}
        check(
            statuses.get("fused_epilogue_b1024") == "mismatch",
            f"wrong kernel is a mismatch ({statuses})",
        )
        check(statuses.get("fused_epilogue_fixed_b512") == "ok", "second repaired variant verified")
    text = out.read_text() if out.exists() else ""
    check(
        "fused_epilogue_fixed" in text and f"llm:{MODEL}" in text, "ModelNew holds the LLM kernel"
    )

    reqs = log["requests"]
    prompts = [prompt_of(r) for r in reqs]
    kw_p = [x for x in prompts if KW in x]
    rep_p = [x for x in prompts if REPAIR in x]
    opt_p = [x for x in prompts if OPTIMISE in x]
    check(len(kw_p) == 3, f"kernel_writer: 3 attempts (429, truncated, ok), got {len(kw_p)}")
    check(len(rep_p) == 3, f"repairer: 3 requests (no code; timeout + retry), got {len(rep_p)}")
    check(len(opt_p) == 3, f"optimiser: 3 attempts on 500, got {len(opt_p)}")
    if len(kw_p) >= 2:
        gap = reqs[1]["t"] - reqs[0]["t"]
        check(gap >= 0.95, f"Retry-After: 1 honoured ({gap:.2f}s)")
    if kw_p:
        check(
            "Reference implementation" in kw_p[0] and "def run(" in kw_p[0],
            "KernelWriter sees the reference code",
        )
        check(
            "conv2d" in kw_p[0] and "[2, 16, 64, 64]" in kw_p[0], "KernelWriter sees ops and shapes"
        )
    if rep_p:
        r0 = rep_p[0]
        check("status: mismatch" in r0, "REPAIR prompt carries the mismatch status")
        check(
            "max abs error" in r0 and "first wrong element" in r0,
            "REPAIR prompt carries the errors",
        )
        check(
            "fused_epilogue_b1024" in r0 and "tl.erf" in r0,
            "REPAIR prompt carries the failing code",
        )
        check("Reference implementation" in r0, "Repairer sees the reference code")
    if opt_p:
        o0 = opt_p[0]
        check("fused_epilogue_fixed_b1024" in o0, "Optimiser sees its parent")
        check(
            "The fastest verified variants so far" in o0 and "### fused_epilogue_fixed_b512" in o0,
            "Optimiser sees the other verified variant",
        )
        check("verified 2/2 trials, untimed" in o0, "Optimiser sees the variants' timing line")
    auth = {r["headers"].get("authorization") for r in reqs}
    check(auth == {f"Bearer {KEY}"}, "every request carried the key from --api-key-env")
    check(all(r["body"]["model"] == MODEL for r in reqs), "--model overrides the configuration")
    check(all(r["body"].get("stream") is True for r in reqs), "requests stream")

    ledger = s.get("llm", {})
    check(
        ledger.get("provider") == "openai" and ledger.get("model") == MODEL,
        "ledger names the model",
    )
    total = ledger.get("total", {})
    check(total.get("calls") == 4, f"4 calls in the ledger ({total.get('calls')})")
    check(total.get("failures") == 2, f"2 failures: unusable + optimiser ({total.get('failures')})")
    by_agent = ledger.get("by_agent", {})
    check(set(by_agent) == {"kernel_writer", "repairer", "optimiser"}, f"agents {set(by_agent)}")
    check(by_agent.get("repairer", {}).get("calls") == 2, "two repairer calls")
    check(
        set(ledger.get("by_subkernel", {})) == {"conv2d_add_mul_gelu"}, "by_subkernel keyed by name"
    )
    outcomes = sorted(c["outcome"] for c in ledger.get("calls", []))
    check(outcomes == ["error", "ok", "ok", "unusable"], f"call outcomes {outcomes}")
    ledger_adds_up(ledger, server, log)
    check(
        (s.get("tokens_in"), s.get("tokens_out"))
        == (total.get("tokens_in"), total.get("tokens_out")),
        f"top-level tokens {s.get('tokens_in')}/{s.get('tokens_out')} are the ledger's total",
    )
    usd = (total.get("tokens_in", 0) * 3 + total.get("tokens_out", 0) * 15) / 1e6
    check(abs(total.get("usd", 0) - usd) < 1e-9, f"money from the price table ({total.get('usd')})")

    runlog = (
        read_jsonl(work / "conv_bias_relu" / "run.jsonl")
        if (work / "conv_bias_relu").exists()
        else read_jsonl(work / "run.jsonl")
    )
    events = [e.get("event") for e in runlog]
    check(
        "llm_config" in events and "llm_usage" in events, f"run.jsonl has the LLM lines ({events})"
    )
    cfg_ev = next((e for e in runlog if e.get("event") == "llm_config"), {})
    check(
        cfg_ev.get("config", {}).get("api_key_env") == "MK_E2E_KEY",
        "run.jsonl names the key variable",
    )
    usage_ev = next((e for e in runlog if e.get("event") == "llm_usage"), {})
    check(
        usage_ev.get("ledger", {}).get("total") == total and usage_ev.get("session_total") == total,
        "run.jsonl's ledger is the run's (one run per CLI process)",
    )
    errors = [e.get("error", "") for e in runlog if e.get("event") == "proposed" and e.get("error")]
    check(
        any("unusable" in e for e in errors),
        f"the reply without code is logged as unusable ({errors})",
    )
    check(any("redacted" in e for e in errors), "the echoed key is redacted in the logged error")
    final = [e for e in runlog if e.get("event") == "final_verify"]
    check(bool(final) and final[-1].get("status") == "ok", "final verification in run.jsonl is ok")
    no_key_anywhere(p, work, [out])


def scenario_anthropic(tmp: Path, cache: Path) -> None:
    """The same problem through the Anthropic messages protocol (streaming)."""
    print("scenario anthropic: examples/conv_bias_relu.py", flush=True)
    kw = [KW, CONV_SK]
    steps: list[dict[str, Any]] = [
        {"match": kw, "status": 529, "headers": {"retry-after-ms": "200"}},
        {"match": kw, "text": kernels.CONV_REPLY_ONE_RIGHT, "usage": {"in": 1700, "out": 650}},
    ]
    server = FakeServer(steps, tmp)
    try:
        work, out = tmp / "anthropic", tmp / "anthropic_ModelNew.py"
        env = base_env()
        env["MK_E2E_ANTHROPIC_KEY"] = KEY
        args = [
            "evolve",
            str(CONV),
            "--provider",
            "anthropic",
            "--model",
            "fake-claude",
            "--base-url",
            server.base,
            "--api-key-env",
            "MK_E2E_ANTHROPIC_KEY",
            *search_args(work, cache, out, beam=1, depth=0, budget=2)[:-1],  # not -q
        ]
        p = run_cli(args, env)
        log = server.log()
    finally:
        server.close()
    s = summary_of(p)
    check(p.returncode == 0, f"anthropic run exits 0 (stderr: {p.stderr[-600:]})")
    check(s.get("verified") is True, "anthropic: composed ModelNew verified")
    sks = s.get("subkernels", [])
    if check(len(sks) == 1, "anthropic: one subkernel"):
        v = chosen_variant(sks[0])
        check(
            v.get("origin") == "llm:fake-claude",
            f"anthropic: LLM variant chosen ({v.get('origin')})",
        )
    reqs = log["requests"]
    check(
        len(reqs) == 2 and all(r["path"] == "/v1/messages" for r in reqs), "anthropic: /v1/messages"
    )
    check(all(r["headers"].get("x-api-key") == KEY for r in reqs), "anthropic: x-api-key header")
    check(all("authorization" not in r["headers"] for r in reqs), "anthropic: no bearer header")
    check(all(isinstance(r["body"].get("system"), str) for r in reqs), "anthropic: system field")
    check(
        "LLM attempt 1 failed" in p.stderr and "retrying in" in p.stderr,
        "anthropic: the retry shows in the progress on stderr",
    )
    ledger = s.get("llm", {})
    check(ledger.get("provider") == "anthropic", "anthropic: ledger provider")
    check(ledger.get("total", {}).get("calls") == 1, "anthropic: one call")
    ledger_adds_up(ledger, server, log)
    no_key_anywhere(p, work, [out])


def scenario_monolithic(tmp: Path, cache: Path) -> None:
    """two_linear.py modular (two subkernels, two KernelWriter calls) and
    --monolithic (one subkernel over the whole forward, one call)."""
    print("scenario monolithic: tests/e2e/llm/two_linear.py, modular vs monolithic", flush=True)
    steps: list[dict[str, Any]] = [
        {
            "match": [KW, "Subkernel `linear_relu`"],
            "text": kernels.fenced("relu_epilogue", "linear + Triton relu", kernels.LINEAR_RELU),
            "usage": {"in": 900, "out": 300},
        },
        {
            "match": [KW, "Subkernel `linear_sigmoid_mul`"],
            "text": kernels.fenced(
                "sigmoid2_epilogue", "linear + Triton 2*sigmoid", kernels.LINEAR_SIGMOID_MUL
            ),
            "usage": {"in": 950, "out": 320},
        },
        {
            "match": [KW, "linear_relu_linear"],
            "text": kernels.fenced(
                "whole_forward", "both layers, Triton activations", kernels.WHOLE_MODULE
            ),
            "usage": {"in": 1200, "out": 420},
        },
    ]
    server = FakeServer(steps, tmp)
    results: dict[str, dict[str, Any]] = {}
    try:
        env = base_env()
        env["MK_E2E_KEY"] = KEY
        for mode in ("modular", "monolithic"):
            work, out = tmp / mode, tmp / f"{mode}_ModelNew.py"
            args = [
                "evolve",
                str(TWO_LINEAR),
                "--model",
                MODEL,
                "--base-url",
                server.base + "/v1",
                "--api-key-env",
                "MK_E2E_KEY",
                "--llm-config",
                '{"max_retries": 1}',
                *search_args(work, cache, out, beam=1, depth=0, budget=4),
            ]
            if mode == "monolithic":
                args.append("--monolithic")
            p = run_cli(args, env)
            check(p.returncode == 0, f"{mode} run exits 0 (stderr: {p.stderr[-600:]})")
            results[mode] = summary_of(p)
            no_key_anywhere(p, work, [out])
        log = server.log()
    finally:
        server.close()
    mod, mono = results.get("modular", {}), results.get("monolithic", {})
    check(mod.get("mode") == "modular" and mono.get("mode") == "monolithic", "modes reported")
    check(len(mod.get("subkernels", [])) == 2, "modular: two subkernels")
    mono_sks = mono.get("subkernels", [])
    if check(len(mono_sks) == 1, f"monolithic: one subkernel ({len(mono_sks)})"):
        sk = mono_sks[0]
        check(
            sk["first_line"] == 16 and sk["last_line"] == 17, "monolithic: covers the whole forward"
        )
        v = chosen_variant(sk)
        check(
            v.get("origin") == f"llm:{MODEL}" and v.get("name") == "whole_forward",
            f"monolithic: the LLM's whole-module kernel is chosen ({v.get('name')})",
        )
    check("monolithic" in mono.get("note", ""), "monolithic: the note says so")
    for mode, s in results.items():
        check(s.get("verified") is True, f"{mode}: composed ModelNew verified")
        for sk in s.get("subkernels", []):
            check(
                chosen_variant(sk).get("origin") == f"llm:{MODEL}",
                f"{mode}: {sk['name']} from the LLM",
            )
    mt = mod.get("llm", {}).get("total", {})
    ot = mono.get("llm", {}).get("total", {})
    check(mt.get("calls") == 2 and ot.get("calls") == 1, "modular 2 calls, monolithic 1")
    check(mt.get("tokens") == 900 + 300 + 950 + 320, f"modular tokens {mt.get('tokens')}")
    check(ot.get("tokens") == 1200 + 420, f"monolithic tokens {ot.get('tokens')}")
    mono_prompt = next(
        (prompt_of(r) for r in log["requests"] if "linear_relu_linear" in prompt_of(r)), ""
    )
    check(
        mono_prompt.count("torch.nn.functional.linear(") >= 2, "monolithic prompt has both layers"
    )
    check(
        "run(x0, fc1_weight, fc1_bias, fc2_weight, fc2_bias)" in mono_prompt,
        "monolithic prompt has the whole signature",
    )
    print(
        f"  tokens: modular {mt.get('tokens')} in {mt.get('calls')} calls, "
        f"monolithic {ot.get('tokens')} in {ot.get('calls')} call",
        flush=True,
    )


def scenario_budget(tmp: Path, cache: Path) -> None:
    """--token-budget: an unusable reply spends it, later proposals are
    refused with the reason, the run still ends with a verified ModelNew."""
    print("scenario budget: examples/conv_bias_relu.py, --token-budget 1000", flush=True)
    steps: list[dict[str, Any]] = [
        {"match": KW, "text": kernels.NO_CODE, "usage": {"in": 1500, "out": 100}},
        {"text": kernels.CONV_REPLY_ONE_RIGHT},  # must never be asked for
    ]
    server = FakeServer(steps, tmp)
    try:
        work, out = tmp / "budget", tmp / "budget_ModelNew.py"
        env = base_env()
        env["MK_E2E_KEY"] = KEY
        args = [
            "evolve",
            str(CONV),
            "--model",
            MODEL,
            "--base-url",
            server.base + "/v1",
            "--api-key-env",
            "MK_E2E_KEY",
            "--token-budget",
            "1000",
            *search_args(work, cache, out, beam=1, depth=2, budget=6),
        ]
        p = run_cli(args, env)
        log = server.log()
    finally:
        server.close()
    s = summary_of(p)
    check(p.returncode == 0 and s.get("verified") is True, "budget: the run ends verified")
    check(len(log["requests"]) == 1, f"budget: one request only ({len(log['requests'])})")
    ledger = s.get("llm", {})
    check(ledger.get("total", {}).get("calls") == 1, "budget: one call in the ledger")
    check(ledger.get("total", {}).get("failures") == 1, "budget: the unusable reply is a failure")
    b = ledger.get("budget", {})
    check(b.get("tokens") == 1000 and b.get("exhausted") is True, f"budget: exhausted ({b})")
    runlog = read_jsonl(work / "conv_bias_relu" / "run.jsonl")
    errors = [e.get("error", "") for e in runlog if e.get("event") == "proposed"]
    check(any("budget" in e for e in errors), f"budget: refusals logged with the reason ({errors})")
    for sk in s.get("subkernels", []):
        check(sk["chosen"] == 0, "budget: the PyTorch reference stays")


def scenario_cli(tmp: Path, cache: Path) -> None:
    """Configuration mistakes fail at once, with the reason, before any work."""
    print("scenario cli: configuration errors", flush=True)
    env = base_env()
    p = run_cli(["evolve", str(CONV), "--proposer", "llm"], env, 30)
    check(p.returncode == 2 and "needs a model" in p.stderr, f"no model: {p.stderr.strip()}")
    p = run_cli(["evolve", str(CONV), "--model", "gpt-x"], env, 30)
    check(p.returncode == 2 and "OPENAI_API_KEY" in p.stderr, f"no key: {p.stderr.strip()}")
    p = run_cli(["evolve", str(CONV), "--proposer", "builtin", "--model", "gpt-x"], env, 30)
    check(
        p.returncode == 2 and "--proposer llm" in p.stderr, f"builtin + --model: {p.stderr.strip()}"
    )
    p = run_cli(["evolve", str(CONV), "--llm-config", '{"model": "m", "api_key": "x"}'], env, 30)
    check(p.returncode == 2 and "api_key" in p.stderr, f"api_key in config: {p.stderr.strip()}")
    p = run_cli(["evolve", str(CONV), "--llm-config", str(tmp / "missing.json")], env, 30)
    check(
        p.returncode == 2 and "missing.json" in p.stderr, f"missing config file: {p.stderr.strip()}"
    )
    p = run_cli(["evolve", str(CONV), "--provider", "bedrock"], env, 30)
    check(p.returncode == 2 and "--provider" in p.stderr, f"bad provider: {p.stderr.strip()}")


SCENARIOS = {
    "cli": scenario_cli,
    "openai": scenario_openai,
    "anthropic": scenario_anthropic,
    "monolithic": scenario_monolithic,
    "budget": scenario_budget,
}


def main() -> int:
    names = sys.argv[1:] or list(SCENARIOS)
    t0 = time.time()
    keep = os.environ.get("MK_E2E_KEEP")  # a directory to keep the run files in (debugging)
    with tempfile.TemporaryDirectory(prefix="mk_llm_e2e_") as d:
        tmp = Path(keep) if keep else Path(d)
        tmp.mkdir(parents=True, exist_ok=True)
        cache = tmp / "cache"
        cache.mkdir(exist_ok=True)
        for n in names:
            if n not in SCENARIOS:
                sys.exit(f"llm_e2e: unknown scenario {n} ({', '.join(SCENARIOS)})")
            SCENARIOS[n](tmp, cache)
    print(f"{passed} passed, {failed} failed ({time.time() - t0:.0f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
