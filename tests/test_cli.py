"""``hlo check FILE``: located errors on stderr and exit status 1, a summary and 0 when valid."""

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import runtime
from runtime.cli import CompileProgress, main

REPO = Path(__file__).resolve().parent.parent

GOOD = "HloModule inc\n\nENTRY %e {\n  %p = f32[] parameter(0)\n  %c = f32[] constant(1)\n  ROOT %r = f32[] add(%p, %c)\n}\n"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "m.hlo"
    path.write_text(text)
    return str(path)


def test_valid_module_prints_a_summary_and_exits_0(tmp_path, capsys):
    path = write(tmp_path, GOOD)
    assert main(["check", path]) == 0
    out, err = capsys.readouterr()
    assert out == f"{path}: OK: module inc, 1 computations, 3 instructions\n"
    assert err == ""


def test_parse_error_prints_file_line_column_source_and_caret(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("add(", "addd("))
    assert main(["check", path]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{path}:6:19 (e)",
        "    ROOT %r = f32[] addd(%p, %c)",
        "                    ^",
        "hint: did you mean add?",
        "HloParseError: unknown opcode: addd",
    ]


def test_verify_error_exits_1_naming_the_instruction(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("ROOT %r = f32[]", "ROOT %r = f32[2]"))
    assert main(["check", path]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"{path}:6:8 (e)"
    assert err.splitlines()[-1] == "HloVerifyError: add r has shape f32[2], but its operands give f32[]"


def test_warnings_go_to_stderr_without_failing(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("constant(1)", "constant(1)\n  %big = f32[30] constant({...})"))
    assert main(["check", path]) == 0
    out, err = capsys.readouterr()
    assert "OK: module inc" in out
    assert err == (f"{path}: warning: line 6: constant big was printed elided as {{...}}: its values "
                   "are unknown (XLA would silently use zeros), so it runs only with "
                   "elided_constants='zeros' or 'random' (--elided)\n")


def test_unreadable_file_is_a_clean_exit(tmp_path):
    with pytest.raises(SystemExit) as info:
        main(["check", str(tmp_path / "missing.hlo")])
    assert "cannot read" in str(info.value.code)


def test_compile_progress_is_shown_only_once_a_build_is_slow():
    quick = CompileProgress(io.StringIO())
    quick("build", 1, 3)
    assert quick.stream.getvalue() == "" and not quick.shown
    slow = CompileProgress(io.StringIO())
    slow.start -= 2.0
    slow("codegen", 0, 1)
    slow("build", 1, 3)
    slow("build", 3, 3)
    assert slow.stream.getvalue() == ("\rcompiling: 1/3 kernels built"
                                      "\rcompiling: 3/3 kernels built\n")


def test_compile_reports_every_kernel_built():
    calls = []
    runtime.compile(GOOD.replace("inc", "inc_progress"), force=True,
                    progress=lambda stage, done, total: calls.append((stage, done, total)))
    builds = [c for c in calls if c[0] == "build"]
    total = builds[0][2]
    assert total >= 1 and builds == [("build", n, total) for n in range(total + 1)]
    assert [c[0] for c in calls[:2]] == ["passes", "codegen"]


def test_run_donates_by_name_and_rejects_a_repeat(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("HloModule inc", "HloModule inc, input_output_alias={ {}: 0 }"))
    assert main(["run", path, "41", "--donate", "p"]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[1] == "42." and "donated [0]" in out
    assert main(["run", path, "41", "--donate", "0,0"]) == 1
    _, err = capsys.readouterr()
    assert "HloArgumentError: donate: parameter 0 (p) is given as '0' and again" in err


# --- hlo memory ---------------------------------------------------------------------------

ADD_MUL = """HloModule add_mul, input_output_alias={ {0}: (0, {}, may-alias) }

ENTRY main {
  x = f32[4,8] parameter(0)
  y = f32[4,8] parameter(1)
  s = f32[4,8] add(x, y)
  m = f32[4,8] multiply(s, y)
  ROOT t = (f32[4,8], f32[4,8]) tuple(m, s)
}
"""


def test_memory_prints_the_plan_and_donation_changes_it(tmp_path, capsys):
    path = write(tmp_path, ADD_MUL)
    assert main(["memory", path]) == 0
    kept = capsys.readouterr().out
    assert kept.startswith("module add_mul: ") and "alignment 128 B" in kept
    assert "as the header declares it" in kept and "alias 128 B" in kept
    assert "allocations: 2 parameter (256 B)" in kept
    assert main(["memory", path, "--donate", "none"]) == 0
    undonated = capsys.readouterr().out
    assert "donated none" in undonated and "alias 0 B" in undonated
    assert main(["memory", path, "--donate", "0"]) == 0
    donated = capsys.readouterr().out
    assert "donated [0]" in donated and "alias 128 B" in donated
    assert main(["memory", path, "--donate", "5"]) == 1
    assert "--donate: 5 is not a parameter number or name; expected numbers 0..1" in \
        capsys.readouterr().err
    assert main(["memory", path, "--donate", "y"]) == 0
    assert "donated [1]" in capsys.readouterr().out


def test_memory_saves_the_figure_without_opencl_or_ipython(tmp_path):
    """In a fresh process where pyopencl cannot be imported."""
    path = write(tmp_path, ADD_MUL)
    png = tmp_path / "plan.png"
    code = ("import sys\nsys.modules['pyopencl'] = None\nfrom runtime.cli import main\n"
            f"assert main(['memory', {path!r}, '--png', {str(png)!r}]) == 0\n"
            "print(sorted(m for m in ('IPython', 'pyopencl', 'ipywidgets') "
            "if sys.modules.get(m) is not None))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    assert png.read_bytes().startswith(b"\x89PNG")


def test_run_with_elided_constants_needs_the_opt_in(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("ROOT %r = f32[] add(%p, %c)",
                                        "%big = f32[12] constant({...})\n"
                                        "  ROOT %r = f32[12] broadcast(%p), dimensions={}"))
    assert main(["run", path, "1"]) == 1
    assert "constant big was printed elided" in capsys.readouterr().err
    assert main(["run", path, "1", "--elided", "zeros"]) == 0
    out = capsys.readouterr().out
    assert "elided constants filled with zeros: the outputs are not the model's" in out


# --- silent builds ------------------------------------------------------------------------

def _fresh_caches(tmp_path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), HLO_MAGIC_CACHE=str(tmp_path / "cache"))
    env.pop("POCL_CACHE_DIR", None)
    return env


def test_a_cold_run_prints_nothing_from_the_opencl_compiler(tmp_path):
    path = write(tmp_path, ADD_MUL)
    done = subprocess.run([sys.executable, "-m", "runtime.cli", "run", path,
                           str([[1] * 8] * 4), str([[2] * 8] * 4)], capture_output=True, text=True,
                          env=_fresh_caches(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    assert any((tmp_path / "cache").iterdir())            # PoCL's cache went there: cold
    progress = re.compile(r"compiling: \d+/\d+ kernels built")
    assert progress.sub("", done.stderr).strip() == ""
    assert done.stdout.startswith("output{0} = float32[4, 8]\n[[6. 6. 6.")
    assert "warning" not in done.stdout


def test_a_kernel_that_makes_clang_warn_builds_silently(tmp_path):
    code = ("import numpy as np\nfrom runtime.opencl.device import build_program, get_device, opencl\n"
            "dev = get_device()\ncl = opencl()\n"
            "src = '__kernel void w(__global int* o, int n) { int x; if (x = n) o[0] = x; }'\n"
            "k = cl.Kernel(build_program(dev, src), 'w')\n"
            "b = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 4)\n"
            "k.set_args(b, np.int32(0))\n"
            "cl.enqueue_nd_range_kernel(dev.queue, k, (1,), None)\ndev.queue.finish()\n"
            "print('done')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_fresh_caches(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("done\n", "")


def test_silenced_output_is_captured_and_the_descriptors_come_back(capfd):
    from runtime.opencl.quiet import silenced_fds
    with silenced_fds() as captured:
        os.write(1, b"from C, fd 1\n")
        os.write(2, b"from C, fd 2\n")
    os.write(1, b"after\n")
    out, err = capfd.readouterr()
    assert (out, err) == ("after\n", "")
    assert captured.text == "from C, fd 1\nfrom C, fd 2\n"
