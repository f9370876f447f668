"""Import cycles between slurm_advisor's packages (issue 43: the target is none).

Reads every module's imports with ``ast`` (module-level and function-local alike: a local
import dodges a cycle at import time but is still one in the design), maps each to its package
(``slurm_advisor.<package>``; the top-level modules count as their own package), and prints the
strongly connected components of the package graph with more than one package, each with the
import lines that close it. Writes JSON.

    python benchmarks/import_graph.py --out benchmarks/results/import_graph.json
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "slurm_advisor"


def package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "slurm_advisor" or len(parts) < 2:
        return None
    return parts[1]


def edges() -> dict[tuple[str, str], list[str]]:
    """(from package, to package) -> the 'file:line' of each import making it."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(REPO)
        own = package_of(".".join(relative.with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            targets = {package_of(n) for n in names} - {None, own}
            for target in targets:
                # "from slurm_advisor import x": x may be a package or a name of __init__
                if target in {p.stem if p.suffix else p.name for p in ROOT.iterdir()}:
                    found[(own, target)].append(f"{relative}:{node.lineno}")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "import_graph.json")
    args = ap.parse_args(argv)
    found = edges()
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in found:
        graph[a].add(b)
    components = cycles(graph)
    print(f"{len(components)} import cycle(s) between packages")
    report = []
    for component in components:
        inside = {(a, b): where for (a, b), where in found.items() if a in component and b in component}
        print(f"- {', '.join(component)}: {sum(len(w) for w in inside.values())} imports")
        for (a, b), where in sorted(inside.items()):
            print(f"    {a} -> {b}: {len(where)} ({', '.join(where[:3])}{', ...' if len(where) > 3 else ''})")
        report.append({"packages": component, "edges": {f"{a}->{b}": where for (a, b), where in inside.items()}})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cycles": report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
