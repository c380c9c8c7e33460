"""``hlo check FILE``: located errors on stderr and exit status 1, a summary and 0 when valid."""

import io
from pathlib import Path

import pytest

import runtime
from runtime.cli import CompileProgress, main

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
                   "are unknown (XLA would silently use zeros), so it cannot be run\n")


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
