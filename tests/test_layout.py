"""The layout keeps its promises (README, "The files"): the top level shows the method, and
imports run one way. Read from the source with `ast`, function-local imports included:

- the network (model.py) and the objective (flow.py) import no project file;
- the method (those two, encoder.py, conditional.py, muon.py) imports nothing from the runner
  (lib/), the baselines or the tools: the runner uses the method, never the other way;
- no project import hides inside a function (only heavy third-party packages are deferred);
- library code (lib/, the method files, tools/'s helpers) imports no command;
- a command imports no other command, except the text interface of sample.py;
- no cycle;
- every command is in tests/conftest.py's COMMANDS, which the bad-input tests run."""

import ast
import glob
import os

from tests.conftest import COMMANDS, ROOT

CARD = {"model", "flow", "encoder", "train", "sample", "evaluate", "distill"}
PURE = {"model", "flow"}  # the network and the objective import no project file
METHOD = PURE | {"encoder", "conditional", "muon"}  # import only each other
# generate / generate_conditional, for train.py and evaluate.py
ALLOWED_COMMAND_IMPORTS = {"sample"}


def modules():
    """{dotted module name: its parsed source} for every project file outside tests/ and
    results/."""
    out = {}
    for path in glob.glob(os.path.join(ROOT, "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, ROOT)
        if rel.split(os.sep)[0] in ("tests", "results") or rel.startswith("."):
            continue
        name = rel[:-3].replace(os.sep, ".").removesuffix(".__init__")
        with open(path) as f:
            out[name] = ast.parse(f.read(), rel)
    return out


MODULES = modules()


def imports(tree):
    """[(imported project module, is it at the top level?)] of one file."""
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from lib import checkpoint` imports lib.checkpoint; `from lib.x import f`, lib.x
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                for a in node.names
            ]
        else:
            continue
        out += [(n, id(node) in top) for n in names if n in MODULES and n.split(".")[0] in MODULES]
    return out


def is_command(tree) -> bool:
    return any(isinstance(n, ast.If) and "__main__" in ast.dump(n.test) for n in tree.body)


COMMAND_FILES = {name for name, tree in MODULES.items() if is_command(tree)}


def test_the_top_level_shows_the_method():
    top = {
        name
        for name in MODULES
        if "." not in name and os.path.isfile(os.path.join(ROOT, name + ".py"))
    }
    assert CARD <= top, f"missing at the top: {sorted(CARD - top)}"
    assert len(top) <= len(CARD) + 3, (
        f"the top level holds {sorted(top - CARD)} beside the card's files"
    )


def test_the_network_and_the_objective_import_no_project_file():
    for name in PURE:
        assert imports(MODULES[name]) == [], f"{name}.py imports {imports(MODULES[name])}"


def test_the_method_imports_nothing_from_the_runner():
    wrong = [
        f"{name}.py -> {mod}"
        for name in METHOD
        for mod, _ in imports(MODULES[name])
        if mod.split(".")[0] not in METHOD
    ]
    assert not wrong, wrong


def test_no_project_import_hides_inside_a_function():
    hidden = [
        f"{name} -> {mod}"
        for name, tree in MODULES.items()
        for mod, top in imports(tree)
        if not top
    ]
    assert not hidden, hidden


def test_library_code_imports_no_command_and_commands_only_the_samplers():
    wrong = []
    for name, tree in MODULES.items():
        for mod, _ in imports(tree):
            if mod in COMMAND_FILES and mod != name:
                if name not in COMMAND_FILES:
                    wrong.append(f"library {name} -> command {mod}")
                elif mod not in ALLOWED_COMMAND_IMPORTS:
                    wrong.append(f"command {name} -> command {mod}")
    assert not wrong, wrong


def test_no_import_cycle():
    graph = {name: {mod for mod, _ in imports(tree)} for name, tree in MODULES.items()}
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in graph.get(node, ()):
            if state.get(nxt) == "open":
                raise AssertionError(
                    "import cycle: " + " -> ".join(path[path.index(nxt) :] + [nxt])
                )
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in graph:
        if name not in state:
            visit(name, [name])


def test_every_command_is_run_by_the_bad_input_tests():
    run = {" ".join(c).removeprefix("-m ").removesuffix(".py") for c in COMMANDS.values()}
    assert COMMAND_FILES == run, (
        f"commands the tests do not know: {sorted(COMMAND_FILES - run)}; "
        f"listed but not commands: {sorted(run - COMMAND_FILES)}"
    )


def test_the_checker_sees_what_it_checks():
    """The rules above would pass vacuously if the reading broke: it sees the known arrows."""
    assert ("lib.checkpoint", True) in imports(MODULES["train"])
    assert ("sample", True) in imports(MODULES["train"]) and "sample" in COMMAND_FILES
    assert {"train", "sample", "evaluate", "distill", "baselines.mdlm"} <= COMMAND_FILES
    assert "lib.config" not in COMMAND_FILES and "flow" not in COMMAND_FILES
    assert ("conditional", True) in imports(MODULES["encoder"])  # method -> method is seen
    assert METHOD <= set(MODULES)
