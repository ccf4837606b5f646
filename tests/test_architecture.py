"""The package's layers: data -> modeling -> lifecycle -> recommendation -> CLI, one way only.

Every ``import`` of a ``wattgpu`` module (at module level or inside a function) is an edge of
the import graph; the test fails on an edge that points to a higher layer or on any cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "wattgpu"
# Lower number, lower layer. ``errors`` and ``config`` are the ground floor everyone may use.
LAYERS = {
    "errors": 0,
    "config": 0,
    "data": 1,
    "modeling": 2,
    "lifecycle": 3,
    "recommendation": 4,
    "cli": 5,
    "cli_data": 5,
    "cli_fleet": 5,
    "cli_llm": 5,
    "cli_options": 5,
    "cli_recommend": 5,
    "cli_render": 5,
    "__main__": 6,
    "cli_reference": 6,
}
# The package root only holds the version and a lazy ``wattgpu.recommend`` façade.
ROOT_FACADE = {("wattgpu", "wattgpu.recommendation")}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


# Inside ``modeling``, three layers that import only downwards (``metrics`` under all three).
MODELING_LAYERS = {"metrics": 0, "physical": 1, "serving": 1.5, "learning": 2, "answering": 3}


def layer(module: str) -> float:
    parts = module.split(".")
    level = LAYERS.get(parts[1], 0) if len(parts) > 1 else 0
    if len(parts) > 2 and parts[1] == "modeling":
        level += MODELING_LAYERS[parts[2]] / 10
    return level


def test_no_module_imports_a_higher_layer():
    upward = [
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        for b in targets
        if layer(b) > layer(a) and (a, b) not in ROOT_FACADE
    ]
    assert not upward, "upward imports: " + ", ".join(sorted(upward))


def test_no_import_cycle():
    graph = import_graph()
    graph["wattgpu"] -= {b for a, b in ROOT_FACADE if a == "wattgpu"}
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])


def test_the_graph_sees_real_edges():
    # guards the two tests above against an empty or broken graph
    graph = import_graph()
    assert "wattgpu.modeling.physical.features" in graph["wattgpu.modeling.learning.models"]
    assert layer("wattgpu.modeling.physical.features") < layer("wattgpu.modeling.learning.models")
    assert layer("wattgpu.modeling.learning.models") < layer("wattgpu.modeling.answering.card")
    assert "wattgpu.data.catalog" in graph["wattgpu.modeling.physical.features"]


MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_a_screen_and_a_bit():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{module_name(path)}.{node.name} ({lines} lines)")
    assert not long, "functions over 80 lines: " + ", ".join(sorted(long))


CLI_MODULES = ("wattgpu.cli", "wattgpu.cli_data", "wattgpu.cli_options", "wattgpu.cli_recommend")
# What training is made of: the CLI reaches it only through ``lifecycle.pipeline`` (it reads
# stores through ``tracking`` and renders tables with ``evaluation``'s Markdown functions).
TRAINING_MODULES = {
    "wattgpu.lifecycle.tuning",
    "wattgpu.modeling.learning.models",
    "wattgpu.modeling.learning.uncertainty",
    "wattgpu.modeling.learning.recipe",
}


def test_the_cli_reaches_training_only_through_the_pipeline():
    graph = import_graph()
    reached = {f"{cli} -> {module}" for cli in CLI_MODULES for module in graph[cli]}
    assert not {edge for edge in reached if edge.split(" -> ")[1] in TRAINING_MODULES}


def command_body(name: str) -> ast.FunctionDef:
    tree = ast.parse((PACKAGE / "cli.py").read_text(encoding="utf-8"))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize("command", ["main_job", "tune"])
def test_the_training_commands_are_one_library_call(command):
    body = command_body(command)
    assert not [n for n in ast.walk(body) if isinstance(n, ast.For | ast.While)]
    calls = [
        n.func.attr
        for n in ast.walk(body)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "pipeline"
    ]
    assert calls in (["main_job"], ["tune", "summary"]), calls


# The serving layer: the served pyfunc, the model server and the inference path behind them,
# `wattgpu predict` and `wattgpu recommend`. The learning layer's training code: Optuna, the
# tuning, the evaluation and the main job. A served model loads the first and never the second.
SERVING_LAYER = (
    "wattgpu.lifecycle.pyfunc",
    "wattgpu.lifecycle.served_model",
    "wattgpu.lifecycle.serving",
    "wattgpu.lifecycle.client",
    "wattgpu.modeling.answering.inference",
    "wattgpu.recommendation",
)
TRAINING_CODE = (
    "wattgpu.lifecycle.tuning",
    "wattgpu.lifecycle.pipeline",
    "wattgpu.modeling.learning.evaluation",
    "optuna",
)


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module ``start`` imports, directly or not, with the module that imports it."""
    seen = {start: ""}
    todo = [start]
    while todo:
        module = todo.pop()
        for nxt in graph.get(module, set()):
            if nxt not in seen:
                seen[nxt] = module
                todo.append(nxt)
    return seen


def with_third_party(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph with edges to third-party top-level packages too (``optuna``, ...)."""
    out = {name: set(targets) for name, targets in graph.items()}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out[name].add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                out[name] |= {a.name.split(".")[0] for a in node.names}
    return out


def test_the_serving_layer_imports_no_training_code():
    graph = with_third_party(import_graph())
    found = []
    for start in SERVING_LAYER:
        assert start in graph, start  # a renamed module must be renamed here too
        seen = reachable(graph, start)
        found += [f"{start} -> ... {seen[bad]} -> {bad}" for bad in TRAINING_CODE if bad in seen]
    assert not found, "the serving layer reaches training code: " + ", ".join(found)


def test_the_training_check_sees_a_real_path():
    # guards the test above: the main job does reach Optuna through the same walk
    seen = reachable(with_third_party(import_graph()), "wattgpu.lifecycle.pipeline")
    assert "optuna" in seen and "wattgpu.lifecycle.tuning" in seen
