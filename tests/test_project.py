"""The project's promises about itself: one dependency list, light imports, CI wiring."""

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_installs_the_pyproject_and_nothing_else():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = [d for d in deps if isinstance(d, dict)]
    assert sorted(d.split("=")[0] for d in conda) == ["pip", "python"], conda
    assert len(pip) == 1 and "-e .[dev,online,bench]" in pip[0]["pip"]
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
    extras = project["optional-dependencies"]
    declared = project["dependencies"] + extras["dev"] + extras["online"]
    for requirement in declared:
        name = requirement.split(">")[0].split("=")[0].split("[")[0].strip().lower()
        assert name in pins, f"{name} is declared in pyproject.toml but not pinned"


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
