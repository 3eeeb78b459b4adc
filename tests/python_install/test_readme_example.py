"""`pip install .` on a fresh machine, then the README's Python example.

Builds the wheel from the repository as `pip install .` does (pyproject.toml,
scikit-build-core), installs it into a new virtual environment that sees only
the system's packages (numpy from scripts/setup.sh's python3-numpy, no .venv,
no build tree), and runs the first ```python block of README.md's "Python"
section there, so the README and this test cannot drift. Each `print(...)`
line of the example ends with `# <what it prints>`, which is checked.

Offline, as CI is: the build uses .venv's scikit-build-core and nanobind
(--no-build-isolation, installed by scripts/setup.sh) and pip reaches no
index. CPU only (HFUSE_CUDA=OFF: the acceptance is a CPU machine, and the
CUTLASS kernels would take minutes). The build folder is the ctest build
tree's python-wheel/, so a second run rebuilds only what changed.

    HFUSE_SOURCE_DIR=. HFUSE_BUILD_PYTHON=.venv/bin/python \\
      HFUSE_WHEEL_BUILD_DIR=build/python-wheel python3 -m pytest tests/python_install
"""
import ast
import os
import re
import subprocess
import sys
import zipfile

import pytest

SOURCE = os.path.abspath(os.environ.get("HFUSE_SOURCE_DIR",
                                        os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_PYTHON = os.environ.get("HFUSE_BUILD_PYTHON", os.path.join(SOURCE, ".venv", "bin", "python"))
WHEEL_BUILD_DIR = os.path.abspath(os.environ.get("HFUSE_WHEEL_BUILD_DIR",
                                                 os.path.join(SOURCE, "build", "python-wheel")))


def run(cmd, **kwargs):
    r = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n" \
                              f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def readme_python_example():
    """The first ```python block of README.md's "## Python" section."""
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        text = f.read()
    sections = re.split(r"^## ", text, flags=re.M)
    python = [s for s in sections if s.startswith("Python\n")]
    assert len(python) == 1, "README.md has no (or more than one) '## Python' section"
    blocks = re.findall(r"^```python\n(.*?)^```", python[0], flags=re.S | re.M)
    assert blocks, "README.md's Python section has no ```python block"
    return blocks[0]


def expected_prints(code):
    """What each top-level print(...) line says it prints (its # comment)."""
    want = []
    for line in code.splitlines():
        if re.match(r"print\(", line):
            m = re.search(r"\)\s*#\s*(.*)$", line)
            assert m, f"README example line {line!r}: a print needs '# <what it prints>'"
            want.append(m.group(1).strip())
    assert want, "the README example prints nothing to check"
    return want


def test_readme_example_parses_and_says_what_it_prints():
    code = readme_python_example()
    ast.parse(code)
    assert "import hfuse" in code or "import numpy as np, hfuse" in code
    expected_prints(code)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheels")
    env = dict(os.environ)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    for var in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        env.pop(var, None)
    run([BUILD_PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-deps",
         "-q", "-w", str(out),
         "--config-settings=build-dir=" + WHEEL_BUILD_DIR,
         "--config-settings=cmake.define.HFUSE_CUDA=OFF",
         SOURCE], env=env, timeout=1800)
    wheels = sorted(out.glob("hfuse-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_holds_the_package_its_extension_and_types(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for want in ("hfuse/__init__.py", "hfuse/py.typed", "hfuse/_hfuse.pyi"):
        assert want in names, f"{wheel.name} lacks {want}: {sorted(names)}"
    assert any(re.fullmatch(r"hfuse/_hfuse\..*\.so", n) for n in names), sorted(names)


@pytest.fixture(scope="module")
def fresh_python(wheel, tmp_path_factory):
    """A new venv (the system's packages only) with the wheel installed."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    base = run([BUILD_PYTHON, "-c", "import sys; print(sys._base_executable)"]).strip()
    run([base, "-m", "venv", "--system-site-packages", str(venv)])
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # No index: numpy (the one dependency) must already be there, as on a
    # machine after scripts/setup.sh.
    run([python, "-m", "pip", "install", "-q", "--no-index", str(wheel)], env=env, timeout=300)
    return python, str(venv)


def test_readme_example_runs_from_the_installed_package(fresh_python):
    python, venv = fresh_python
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HFUSE_"))}
    # -I: neither the working directory nor PYTHON* variables reach sys.path,
    # so `import hfuse` can only find the installed package.
    where = run([python, "-I", "-c", "import hfuse; print(hfuse.__file__)"], cwd=SOURCE, env=env)
    assert where.strip().startswith(os.path.realpath(venv)) or where.strip().startswith(venv), where
    code = readme_python_example()
    # The example's paths are relative to the repository's root.
    out = run([python, "-I", "-c", code], cwd=SOURCE, env=env, timeout=300)
    assert out.splitlines() == expected_prints(code)
