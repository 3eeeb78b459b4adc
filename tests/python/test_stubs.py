"""The Python module's types and docstrings: the extension's stub
(hfuse/_hfuse.pyi, generated at build time by nanobind's stubgen) against the
extension itself, the package's inline annotations (py.typed), a docstring on
every public function, class, method and property, and mypy --strict over the
package and over code that uses it (what a user's type checker sees).

    PYTHONPATH=build/python .venv/bin/python -m pytest tests/python/test_stubs.py

mypy comes from scripts/setup.sh (.venv).
"""
import ast
import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest

import hfuse
import hfuse._hfuse as ext

PACKAGE = os.path.dirname(os.path.abspath(hfuse.__file__))
STUB = os.path.join(PACKAGE, "_hfuse.pyi")


def stub_module():
    with open(STUB, encoding="utf-8") as f:
        return ast.parse(f.read(), STUB)


def defs(body):
    """{name: node} of the functions, classes and properties in a body."""
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
    return out


def public(names):
    return sorted(n for n in names if not n.startswith("_") or n == "__init__")


def runtime_class_members(cls):
    return public(k for k in vars(cls) if k not in ("__module__", "__doc__", "__new__"))


def normalise(annotation):
    """An annotation as text, without the module prefixes that stubgen moves
    into imports (collections.abc.Sequence -> Sequence)."""
    return re.sub(r"\b(collections\.abc|typing)\.", "", annotation)


def nb_signature(func):
    """The nanobind function's signature as an ast.FunctionDef, its defaults
    filled in (nanobind writes them as \\0, \\1, ... beside the text)."""
    (text, doc, defaults), = func.__nb_signature__  # no overloads in this module
    text = re.sub(r"\\(\d+)", lambda m: repr(defaults[int(m.group(1))]), text)
    text = re.sub(r"^def \(", "def _(", text)  # a property getter has no name
    return ast.parse(text + ": ...").body[0], doc


def describe(fn):
    """A FunctionDef as comparable data: each parameter's name, annotation and
    default, and the return annotation."""
    args = fn.args
    plain = args.posonlyargs + args.args
    defaults = [None] * (len(plain) - len(args.defaults)) + list(args.defaults)
    params = [(a.arg, normalise(ast.unparse(a.annotation)) if a.annotation else None,
               ast.literal_eval(d) if d is not None else "<required>")
              for a, d in zip(plain, defaults)]
    params += [(a.arg, normalise(ast.unparse(a.annotation)) if a.annotation else None,
                ast.literal_eval(d) if d is not None else "<required>")
               for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return params, normalise(ast.unparse(fn.returns)) if fn.returns else None


def test_stub_declares_exactly_the_extensions_names():
    stub = defs(stub_module().body)
    assert public(stub) == public(k for k in vars(ext) if not inspect.ismodule(getattr(ext, k)))
    for name, obj in vars(ext).items():
        if inspect.isclass(obj) and not name.startswith("_"):
            assert public(defs(stub[name].body)) == runtime_class_members(obj), name


def extension_functions():
    """(qualified name, the runtime function, its stub node) of every function,
    method and property getter of the extension."""
    stub = defs(stub_module().body)
    out = []
    for name, obj in sorted(vars(ext).items()):
        if name.startswith("_"):
            continue
        if inspect.isclass(obj):
            members = defs(stub[name].body)
            for member in runtime_class_members(obj):
                value = vars(obj)[member]
                func = value.fget if isinstance(value, property) else value
                if hasattr(func, "__nb_signature__"):
                    out.append((f"{name}.{member}", func, members.get(member)))
        elif hasattr(obj, "__nb_signature__"):
            out.append((name, obj, stub.get(name)))
    return out


def test_every_extension_function_is_compared():
    names = [n for n, _, _ in extension_functions()]
    assert {"cuda_available", "Session.__init__", "Session.run", "Session.inputs",
            "Session.report", "Session.device"} <= set(names)


@pytest.mark.parametrize("name,func,node", extension_functions(),
                         ids=[n for n, _, _ in extension_functions()])
def test_stub_signature_and_docstring_are_the_extensions(name, func, node):
    assert node is not None, f"{name}: not in the stub"
    runtime, doc = nb_signature(func)
    want_params, want_return = describe(runtime)
    got_params, got_return = describe(node)
    assert got_params == want_params, name
    assert got_return == want_return, name
    assert doc and ast.get_docstring(node) == inspect.cleandoc(doc), name
    # No bare containers: a user's checker learns the element types.
    for text in [a for _, a, _ in got_params if a] + [got_return]:
        assert not re.fullmatch(r"(list|dict|tuple|object)", text), f"{name}: {text}"


def test_stub_classes_and_module_have_docstrings():
    tree = stub_module()
    assert ast.get_docstring(tree)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            assert ast.get_docstring(node), node.name


def test_package_functions_are_annotated_and_documented():
    """What hfuse exports, as a user's checker and help() see it."""
    assert os.path.isfile(os.path.join(PACKAGE, "py.typed"))
    checked = []
    own = [n for n, v in vars(hfuse).items()
           if inspect.isfunction(v) and v.__module__ == "hfuse" and n not in hfuse.__all__]
    for name in list(hfuse.__all__) + own:
        obj = getattr(hfuse, name)
        assert inspect.getdoc(obj), name
        members = [(name, obj)] if inspect.isfunction(obj) else []
        if inspect.isclass(obj) and obj.__module__ == "hfuse":
            for key, value in vars(obj).items():
                if key.startswith("_") and key != "__init__":
                    continue
                if isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value):
                    members.append((f"{name}.{key}", value))
        for qual, fn in members:
            sig = inspect.signature(fn)
            if not qual.endswith("__init__"):
                assert inspect.getdoc(fn), qual
            for p in list(sig.parameters.values())[1 if "." in qual else 0:]:
                assert p.annotation is not inspect.Parameter.empty, f"{qual}({p.name})"
            assert sig.return_annotation is not inspect.Signature.empty, qual
            checked.append(qual)
    assert {"fuse", "InferenceSession.run", "InferenceSession.get_inputs",
            "NodeArg.__init__", "cuda_available", "_device_of"} <= set(checked)


def mypy(*args, cwd=None):
    """mypy's exit code and output, with the package's folder on its path."""
    env = dict(os.environ, MYPYPATH=os.path.dirname(PACKAGE))
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                        "--no-error-summary", "--hide-error-context", *args],
                       env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_mypy_strict_accepts_the_package():
    # __init__.py calls the extension through its stub: a keyword, argument
    # type or return the stub lacks fails here.
    code, out = mypy("--strict", "-p", "hfuse")
    assert code == 0, out


def test_mypy_sees_the_types(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""\
        import numpy as np
        import hfuse
        from hfuse import _hfuse

        def main() -> None:
            sess = hfuse.InferenceSession("m.onnx", providers=["CPUExecutionProvider"])
            names: list[str] = [i.name for i in sess.get_inputs()]
            outs = sess.run(None, {names[0]: np.zeros((2, 3), np.float32)})
            report: dict[str, object] = sess.fusion_report()
            data, rep = hfuse.fuse(b"{}", rules="hfuse", dims={"batch": 8})
            ok, why = _hfuse.cuda_available()
            shape: list[int | str] = _hfuse.Session("m.onnx").inputs()[0][1]
            reveal_type(data)
            reveal_type(ok)
            reveal_type(shape)
            del outs, report, rep, why
    """))
    code, out = mypy("--strict", str(good), cwd=tmp_path)
    assert code == 0, out
    out = out.replace("builtins.", "")  # mypy < 2 qualifies builtins
    assert 'good.py:13: note: Revealed type is "bytes"' in out, out
    assert 'good.py:14: note: Revealed type is "bool"' in out, out
    assert 'good.py:15: note: Revealed type is "list[int | str]"' in out, out

    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""\
        import hfuse
        from hfuse import _hfuse
        hfuse.fuse(3)
        _hfuse.Session("m.onnx", dims={"batch": "eight"})
        hfuse.InferenceSession("m.onnx").run(None, {"x": 1}, None, 4)
        n: int = _hfuse.cuda_available()[1]
    """))
    code, out = mypy("--strict", str(bad), cwd=tmp_path)
    assert code == 1
    assert len(re.findall(r"bad\.py:\d+: error", out)) == 4, out
    for line in (3, 4, 5, 6):
        assert f"bad.py:{line}: error" in out, out
