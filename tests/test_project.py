"""The project's promises about itself: one dependency list, light imports, CI wiring."""

import ast
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# what `make lab` must not install: the browser driver, the site builder, the linter, the
# test tools and the benchmark peers (`make test`, `make html`, `make bench` install them)
NOT_FOR_LEARNERS = ["playwright", "sphinx", "myst-nb", "sphinx-book-theme", "ruff", "pytest",
                    "nbval", "pytest-xdist", "rank-bm25", "bm25s", "tantivy"]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _installed_closure(extras: list[str]) -> set[str]:
    """Every distribution `pip install -e '.[extras]'` brings: the project's own lists (read
    from pyproject.toml, self-references included), then the installed metadata."""
    project = _pyproject()["project"]
    own = canonicalize_name(project["name"])
    todo = [Requirement(line) for line in project["dependencies"]]
    wanted, expanded = list(extras), set()
    while wanted:
        extra = wanted.pop()
        if extra in expanded:
            continue
        expanded.add(extra)
        for line in project["optional-dependencies"][extra]:
            req = Requirement(line)
            if canonicalize_name(req.name) == own:
                wanted.extend(req.extras)
            else:
                todo.append(req)
    found: set[str] = set()
    done: set[tuple[str, frozenset]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        found.add(name)
        for line in metadata.distribution(name).requires or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e})
                                         for e in {"", *req.extras}):
                todo.append(sub)
    return found


def _module_imports(source: str) -> set[str]:
    """Top-level names of every module a piece of Python imports (lazy imports included)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _notebook_sources(path: Path) -> list[str]:
    from IPython.core.inputtransformer2 import TransformerManager

    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [TransformerManager().transform_cell("".join(c["source"]))
            for c in cells if c["cell_type"] == "code"]


def test_environment_yml_installs_the_pyproject_and_nothing_else():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = [d for d in deps if isinstance(d, dict)]
    assert sorted(d.split("=")[0] for d in conda) == ["pip", "python"], conda
    assert len(pip) == 1 and "-e .[lab]" in pip[0]["pip"]
    python = next(d for d in conda if d.startswith("python"))
    minimum = _pyproject()["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, python.split("=")[1].split("."))) >= tuple(map(int, minimum.split(".")))


def test_constraints_pin_every_declared_dependency():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    project = _pyproject()["project"]
    declared = [*project["dependencies"], *(line for extra in
                                            project["optional-dependencies"].values()
                                            for line in extra)]
    for requirement in declared:
        name = canonicalize_name(Requirement(requirement).name)
        if name == project["name"]:
            continue  # dev = labmem[lab,test,docs,bench]: the project's own extras
        assert name in pins, f"{name} is declared in pyproject.toml but not pinned"
    assert "pytest-xdist" in pins


def test_dev_installs_every_extra_and_lab_only_what_the_chapters_need():
    extras = _pyproject()["project"]["optional-dependencies"]
    dev = _installed_closure(["dev"])
    for name, requirements in extras.items():
        for line in requirements:
            req = canonicalize_name(Requirement(line).name)
            assert req == "labmem" or req in dev, f"dev does not install {req} ({name})"
    lab = _installed_closure(["lab"])
    assert {"jupyterlab", "ipykernel", "jupyterlab-rise", "anthropic", "mcp",
            "nbconvert"} <= lab
    assert sorted(lab & set(NOT_FOR_LEARNERS)) == []


def test_every_import_of_the_chapters_is_in_the_lab_install():
    """What a chapter runs (its code cells, a solution's, and all of labmem, which they
    import) needs nothing beyond the lab extra: the stdlib, labmem, or a distribution that
    `pip install -e '.[lab]'` brings."""
    lab = _installed_closure(["lab"])
    provided = {module: {canonicalize_name(d) for d in dists}
                for module, dists in metadata.packages_distributions().items()}
    sources = {path: [path.read_text(encoding="utf-8")]
               for path in sorted((ROOT / "labmem").rglob("*.py"))}
    for folder in ("notebooks", "solutions"):
        sources |= {path: _notebook_sources(path)
                    for path in sorted((ROOT / folder).glob("*.ipynb"))}
    missing = {}
    for path, texts in sources.items():
        for module in set().union(*map(_module_imports, texts)):
            if module in sys.stdlib_module_names or module in ("__future__", "labmem"):
                continue
            if not provided.get(module, set()) & lab:
                missing.setdefault(module, []).append(path.relative_to(ROOT).as_posix())
    assert missing == {}
    assert len(sources) > 20


def _make_dry_run(target: str, tmp_path: Path) -> str:
    out = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}"],
                         capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.parametrize(("target", "extra", "jupyter"), [
    ("lab", "lab", True), ("install-lab", "lab", True), ("test", "dev", True),
    ("notebooks", "dev", True), ("install", "dev", True), ("html", "docs", False),
    ("bench", "bench", False)])
def test_each_make_target_installs_its_own_extra(target, extra, jupyter, tmp_path):
    commands = _make_dry_run(target, tmp_path)
    assert re.findall(r"install -q -c constraints.txt -e '\.\[(\w+)\]'", commands) == [extra]
    # the kernel every notebook names and the lab's settings, wherever notebooks run
    assert ("ipykernel install --sys-prefix" in commands) is jupyter
    assert ("overrides.json" in commands) is jupyter
    if target == "lab":
        assert "tools/lab.py" in commands


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / "README.md").read_text()
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_importing_labmem_is_light_and_does_no_io(tmp_path):
    code = (
        "import sys, labmem, labmem.recall, labmem.cli\n"
        "heavy = [m for m in ('pandas', 'matplotlib', 'anthropic', 'openai') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    home = tmp_path / "home"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"LABMEM_HOME": str(home), "HOME": str(tmp_path), "PATH": ""},
                         check=True)
    assert out.stdout.strip() == "[]"
    assert not home.exists(), "importing labmem created the default store"


def test_code_passes_ruff():
    ruff = Path(sys.executable).with_name("ruff")
    out = subprocess.run([str(ruff), "check", "labmem", "tests", "tools", "bench"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
