"""%%hlo, %hlo_devices and the extension's life cycle, driven through a real InteractiveShell."""

from __future__ import annotations

import re

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import runtime
from hlo_magic import HloMagics, HloResult

from ..conftest import REPO
from .fresh_python import run_python
from .hlo_texts import ADD_MUL, INCREMENT, JAX_NAMED, MUST_ALIAS


def instances(ip) -> list:
    return [c for c in ip.configurables if isinstance(c, HloMagics)]


def run(ip, cell: str):
    """Run a cell as a user would; returns (ExecutionResult, captured output)."""
    with capture_output() as cap:
        result = ip.run_cell(cell)
    return result, cap


# --- loading ------------------------------------------------------------------------------

def test_loading_is_quiet_and_imports_neither_opencl_nor_matplotlib():
    code = ("import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
            "ip = InteractiveShell.instance()\nip.run_line_magic('load_ext', 'hlo_magic')\n"
            "heavy = ('pyopencl', 'matplotlib', 'ipywidgets')\n"
            "print(sorted(m for m in heavy if m in sys.modules))\n"
            "print('hlo' in ip.magics_manager.magics['cell'])\n")
    assert run_python(code) == ["[]", "True"]


def test_a_report_loads_neither_the_lowering_rules_nor_matplotlib():
    """A cell without --run shows the analysis: no kernel is generated, so the lowering
    rules (0.15 s to import) and matplotlib (figures are asked for apart) stay unloaded in a
    kernel's first report."""
    code = ("import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
            "ip = InteractiveShell.instance()\nip.run_line_magic('load_ext', 'hlo_magic')\n"
            f"r = ip.run_cell_magic('hlo', '', {ADD_MUL!r})\n"
            "bundle, _ = ip.display_formatter.format(r)\n"
            "heavy = ('runtime.codegen.families', 'matplotlib')\n"
            "print(sorted(m for m in heavy if m in sys.modules), 'text/html' in bundle)\n")
    assert run_python(code) == ["[] True"]


def test_load_registers_one_instance_and_loading_again_is_harmless(ip):
    assert len(instances(ip)) == 1
    manager = ip.magics_manager
    assert "hlo" in manager.magics["cell"] and "hlo_custom_call" in manager.magics["cell"]
    assert "hlo_devices" in manager.magics["line"] and "hlo_custom_call" in manager.magics["line"]
    assert "hlo_jax" in manager.magics["line"]
    with capture_output() as cap:
        ip.run_line_magic("load_ext", "hlo_magic")
    assert "already loaded" in cap.stdout
    assert len(instances(ip)) == 1


def test_a_returned_figure_displays_as_png_while_loaded(ip):
    from matplotlib.figure import Figure
    fig = Figure()
    fig.add_subplot().plot([0, 1])
    bundle, _ = ip.display_formatter.format(fig)
    assert bundle["image/png"].startswith(b"\x89PNG")
    ip.run_line_magic("unload_ext", "hlo_magic")
    try:
        bundle, _ = ip.display_formatter.format(fig)
        assert "image/png" not in bundle
    finally:
        ip.run_line_magic("load_ext", "hlo_magic")


def test_unload_removes_everything_load_added(ip):
    ip.run_line_magic("unload_ext", "hlo_magic")
    try:
        manager = ip.magics_manager
        assert "HloMagics" not in manager.registry
        assert not instances(ip)
        for kind in ("line", "cell"):
            assert not {"hlo", "hlo_devices", "hlo_custom_call"} & set(manager.magics[kind])
        result, cap = run(ip, "%%hlo\n" + INCREMENT)
        assert not result.success and "not found" in cap.stderr
    finally:
        ip.run_line_magic("load_ext", "hlo_magic")


def test_reload_gives_a_fresh_instance_that_keeps_config_settings(ip):
    ip.run_line_magic("config", "HloMagics.max_table_rows = 3")
    old = instances(ip)[0]
    ip.run_line_magic("reload_ext", "hlo_magic")
    (new,) = instances(ip)
    assert new is not old and new.max_table_rows == 3 and new.default_show == "assignment"
    assert ip.magics_manager.magics["cell"]["hlo"].__self__ is new


def test_lazy_magics_load_the_extension_on_first_use(ip):
    """As ``c.MagicsManager.lazy_magics = {"hlo": "hlo_magic"}`` in a config file does."""
    ip.run_line_magic("unload_ext", "hlo_magic")
    ip.magics_manager.lazy_magics["hlo"] = "hlo_magic"
    try:
        ip.user_ns["x"] = 1.5
        result = ip.run_cell_magic("hlo", "--run x -q", INCREMENT)
        assert result is None
        assert ip.user_ns["increment"](1.5) == np.float32(2.5)
        assert len(instances(ip)) == 1
    finally:
        ip.magics_manager.lazy_magics.pop("hlo", None)


# --- binding and running ------------------------------------------------------------------

def test_run_binds_only_the_module_name_and_shows_the_output(ip):
    ip.user_ns["x"] = 41.0
    before = set(ip.user_ns)
    result = ip.run_cell_magic("hlo", "--run x", INCREMENT)
    assert set(ip.user_ns) - before == {"increment"}
    assert isinstance(result, HloResult)
    assert np.asarray(result.outputs) == np.float32(42.0)
    assert isinstance(ip.user_ns["increment"], runtime.Executable)
    assert ip.user_ns["increment"](1.0) == np.float32(2.0)
    assert repr(result) == ("HloResult(module=increment, peak=8 B, outputs=(f32[],), "
                            "device=pocl:cpu)")


def test_inputs_flag_is_the_comma_separated_form_of_run(ip):
    ip.user_ns.update(a=np.ones((4, 8), np.float32), b=np.full((4, 8), 2, np.float32))
    by_run = ip.run_cell_magic("hlo", "--run a b", ADD_MUL)
    by_inputs = ip.run_cell_magic("hlo", "-i a,b", ADD_MUL)
    for result in (by_run, by_inputs):
        m, s = result.outputs
        np.testing.assert_array_equal(s, np.full((4, 8), 3, np.float32))
        np.testing.assert_array_equal(m, np.full((4, 8), 6, np.float32))
    with pytest.raises(UsageError, match="not both"):
        ip.run_cell_magic("hlo", "--run a b -i a,b", ADD_MUL)


def test_donating_a_device_array_updates_it_in_place(ip):
    ip.user_ns["d"] = runtime.device_put(np.float32(41.0))
    result = ip.run_cell_magic("hlo", "--run d --donate 0", INCREMENT)
    assert result.run.donated == (0,) and result.run.copied == ()
    assert ip.user_ns["d"].is_deleted()
    assert result.donated == frozenset({0})
    assert result.memory_stats == runtime.buffers.MemoryStats(4, 4, 4, 0, 4)
    html = result._repr_html_()
    assert "donated: output {} written in place" in html


def test_without_donation_the_run_copies_and_the_plan_gives_the_output_its_own_buffer(ip):
    ip.user_ns["x"] = np.float32(1.0)
    result = ip.run_cell_magic("hlo", "--run x", INCREMENT)
    assert result.run.donated == () and result.run.copied == (0,)
    assert result.memory_stats == runtime.buffers.MemoryStats(4, 4, 0, 0, 8)
    assert "the run copied it first (copy-protection)" in result._repr_html_()


def test_donate_all_and_bad_donate_values(ip):
    result = ip.run_cell_magic("hlo", "--donate all", ADD_MUL)
    assert result.donated == frozenset({0, 1})
    assert result.peak == 400
    assert ip.run_cell_magic("hlo", "--donate y", ADD_MUL).donated == frozenset({1})
    for value, bad in (("5", "5"), ("z", "'z'"), ("0,-1", "'-1'")):
        with pytest.raises(UsageError) as caught:
            ip.run_cell_magic("hlo", f"--donate {value}", ADD_MUL)
        assert str(caught.value) == (f"--donate '{value}': {bad} is not a parameter number or "
                                     "name; expected numbers 0..1, names x, y, or 'all'")
    with pytest.raises(UsageError, match=r"--donate '0,x': parameter 0 \(x\) is given as '0' "
                                         r"and again as 'x'"):
        ip.run_cell_magic("hlo", "--donate 0,x", ADD_MUL)


def test_must_alias_parameters_are_always_in_the_plan(ip):
    result = ip.run_cell_magic("hlo", "", MUST_ALIAS)
    assert result.donated == frozenset({0})
    assert result.memory_stats.alias == 16
    assert "must-alias: always donated" in result._repr_html_()


def test_out_binds_the_result_and_quiet_or_none_return_nothing(ip):
    returned = ip.run_cell_magic("hlo", "-o r", INCREMENT)
    assert ip.user_ns["r"] is returned
    assert ip.run_cell_magic("hlo", "--show none -o r2", INCREMENT) is None
    assert isinstance(ip.user_ns["r2"], HloResult)
    assert ip.run_cell_magic("hlo", "-q", INCREMENT) is None
    shown = ip.run_cell_magic("hlo", "--show none", INCREMENT)
    assert shown._repr_html_() == f"<code>{repr(shown)}</code>"
    with pytest.raises(UsageError, match="-o '2r': expected a Python variable name"):
        ip.run_cell_magic("hlo", "-o 2r", INCREMENT)


def test_a_module_name_that_is_not_an_identifier_is_bound_sanitised(ip):
    result = ip.run_cell_magic("hlo", "", JAX_NAMED)
    assert isinstance(ip.user_ns["jit_f_1"], runtime.Executable)
    assert result.bound_as == "jit_f_1"
    assert "jit_f_1 (&#x27;jit_f.1&#x27; is not a Python identifier)" in result._repr_html_()


def test_force_recompiles_and_the_report_says_whether_the_cache_was_hit(ip):
    ip.run_cell_magic("hlo", "-q", INCREMENT)
    again = ip.run_cell_magic("hlo", "", INCREMENT)
    assert again.cache_hit and "cache hit (first compiled in" in again._repr_html_()
    forced = ip.run_cell_magic("hlo", "-f", INCREMENT)
    assert not forced.cache_hit and "analysed in" in forced._repr_html_()


def test_device_flag_and_config(ip):
    result = ip.run_cell_magic("hlo", "--device cpu", INCREMENT)
    assert result.device.kind == "cpu"
    with pytest.raises(UsageError, match=r"--device 'no-such-device': no OpenCL device "
                                         r"matches; devices: cpu:0"):
        ip.run_cell_magic("hlo", "--device no-such-device", INCREMENT)
    ip.run_line_magic("config", "HloMagics.device = 'cpu:0'")
    assert ip.run_cell_magic("hlo", "", INCREMENT).device.spec == "cpu:0"


def test_the_line_is_not_variable_expanded(ip):
    ip.user_ns["what"] = "none"
    with pytest.raises(UsageError, match=r"--show '\{what\}'"):
        ip.run_cell_magic("hlo", "--show {what}", INCREMENT)


# --- what is shown ------------------------------------------------------------------------

def test_html_report_content(ip):
    ip.user_ns.update(a=np.ones((4, 8), np.float32), b=np.ones((4, 8), np.float32))
    result = ip.run_cell_magic("hlo", "--run a b --donate 0", ADD_MUL)
    bundle, _ = ip.display_formatter.format(result)
    html = bundle["text/html"]
    assert "image/png" not in bundle
    for expected in (
        "HloModule add_mul", "(x: f32[4,8], y: f32[4,8]) -&gt; (f32[4,8], f32[4,8])",
        "output {0} (may-alias)", "donated: output {0} written in place",
        "cannot alias: no input_output_alias or buffer_donor entry names this parameter",
        "<td style=\"padding:1px 10px 1px 0;text-align:left\">alias</td>"
        "<td style=\"padding:1px 10px 1px 0;text-align:left\">128 B</td>",
        "reached at step 4 (t)", "Allocations", "Outputs",
    ):
        assert expected in html, expected
    peak_rows = html.split("Buffers live at the peak")[1]
    order = [peak_rows.index(f">{name}</td>") for name in ("s", "x", "y", "t")]
    assert order == sorted(order)
    assert "background" not in html and "<script" not in html
    assert bundle["text/plain"].startswith("HloModule add_mul\n")


@pytest.mark.parametrize("show, present, absent", [
    ("hlo", ["HLO (as parsed)", "ROOT %t = (f32[4,8], f32[4,8]) tuple(%m, %s)"],
     ["Allocations", "OpenCL source"]),
    ("kernels", ["Kernels", "OpenCL source", "__kernel"], ["Allocations"]),
    ("assignment", ["Allocations", "Buffers live at the peak"], ["HLO (as parsed)"]),
    ("timeline,hlo", ["data:image/png;base64,", "HLO (as parsed)"], ["Allocations"]),
])
def test_show_picks_the_sections(ip, show, present, absent):
    result = ip.run_cell_magic("hlo", f"--show {show}", ADD_MUL)
    html = result._repr_html_()
    for text in present:
        assert text in html, text
    for text in absent:
        assert text not in html, text
    assert ("image/png" in result._repr_mimebundle_()) == ("timeline" in show)


def test_show_panel_displays_the_report_then_the_widget_after_its_static_copy(ip):
    with capture_output() as cap:
        returned = ip.run_cell_magic("hlo", "--show panel -o r", ADD_MUL)
    assert returned is None
    kinds = [sorted(out.data) for out in cap.outputs]
    assert "text/html" in kinds[0]
    assert kinds[1] == ["image/png", "text/html", "text/plain"]
    assert "application/vnd.jupyter.widget-view+json" in kinds[2]


def test_table_limit_comes_from_config_and_counts_what_it_left_out(ip):
    ip.run_line_magic("config", "HloMagics.max_table_rows = 2")
    html = ip.run_cell_magic("hlo", "", ADD_MUL)._repr_html_()
    assert "\u2026 3 more buffers" in html and "\u2026 3 more allocations" in html


def test_default_show_from_config(ip):
    ip.run_line_magic("config", "HloMagics.default_show = 'hlo'")
    html = ip.run_cell_magic("hlo", "", INCREMENT)._repr_html_()
    assert "HLO (as parsed)" in html and "Allocations" not in html


@pytest.mark.parametrize("name, value, message", [
    ("max_table_rows", "0", "HloMagics.max_table_rows = 0: expected a positive number"),
    ("default_show", "'bogus'", "HloMagics.default_show 'bogus': expected a comma-separated "
                                "list of hlo, assignment, timeline, annotated, kernels, panel, none"),
    ("alignment", "100", "HloMagics.alignment = 100: expected 0 (the device's) or a power of "
                         "two"),
    ("device", "'no-such-device'", "HloMagics.device 'no-such-device': no OpenCL device "
                                   "matches; devices: cpu:0"),
    ("progress_after", "-1.0", "HloMagics.progress_after = -1.0: expected seconds >= 0"),
])
def test_config_rejects_bad_values(ip, caplog, name, value, message):
    """IPython's %config logs a rejected value and keeps the old one."""
    magics = instances(ip)[0]
    before = getattr(magics, name)
    ip.run_line_magic("config", f"HloMagics.{name} = {value}")
    assert getattr(magics, name) == before
    assert message in caplog.text


def test_config_lists_every_setting_with_help(ip):
    _, cap = run(ip, "%config HloMagics")
    for name in ("device", "alignment", "default_show", "max_table_rows",
                 "timeline_max_buffers", "full_traceback", "progress_after", "figure_theme"):
        assert f"HloMagics.{name}=" in cap.stdout
    assert "Current: 'assignment'" in cap.stdout


def test_help_is_the_docstring_with_examples_and_the_usage(ip):
    _, cap = run(ip, "%%hlo?")
    text = cap.stdout
    assert "Analyse the HLO module in the cell" in text
    assert "%%hlo --run x" in text and "--donate 0" in text and "--show assignment,timeline" in text
    assert "%%hlo [--run [NAME ...]]" in text
    for flag in ("--run", "--inputs", "--donate", "--device", "--show", "--out", "--force",
                 "--quiet"):
        assert flag in text


def test_devices_magic(ip):
    table = ip.run_line_magic("hlo_devices", "")
    specs = [d.spec for d in table.devices]
    assert "cpu:0" in specs and table.default in table.devices
    text = repr(table)
    assert "OpenCL devices" in text and "default" in text and "cpu:0" in text
    assert "<table>" in table._repr_html_()
    with pytest.raises(UsageError, match="takes no arguments"):
        ip.run_line_magic("hlo_devices", "cpu")


# --- progress -----------------------------------------------------------------------------

def test_a_slow_compile_shows_kernel_build_progress_at_the_first_run(ip):
    ip.run_line_magic("config", "HloMagics.progress_after = 0.0")
    with capture_output() as cap:
        ip.run_cell_magic("hlo", "-f -q", ADD_MUL)
    assert cap.outputs == []
    with capture_output() as cap:
        ip.user_ns["add_mul"](np.ones((4, 8), np.float32), np.ones((4, 8), np.float32))
    texts = [out.data["text/plain"] for out in cap.outputs]
    assert re.fullmatch(r"compiling add_mul: (\d+)/(\d+) kernels built, \d+ to go", texts[0])
    done, total = map(int, re.findall(r"\d+", texts[0])[:2])
    assert texts[0].endswith(f", {total - done} to go")
    assert texts[-1].startswith("compiled add_mul: ")
    assert "<progress" in cap.outputs[0].data["text/html"]


def test_a_fast_compile_shows_no_progress(ip):
    ip.run_line_magic("config", "HloMagics.progress_after = 600.0")
    ip.user_ns.update(x=np.ones((4, 8), np.float32), y=np.ones((4, 8), np.float32))
    with capture_output() as cap:
        ip.run_cell_magic("hlo", "-f -q --run x y", ADD_MUL)
    assert cap.outputs == []


# --- kernels are built at the first run -----------------------------------------------------

@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """The modules whose kernels were built, one entry per build."""
    from runtime.execution import kernel_builds
    built: list[str] = []
    original = kernel_builds.build_kernels

    def counting(dev, program, report, times=None):
        built.append(program.kernel_names)
        return original(dev, program, report, times)
    monkeypatch.setattr(kernel_builds, "build_kernels", counting)
    return built


def test_without_run_the_report_comes_from_the_analysis_and_nothing_is_built(ip, builds):
    result = ip.run_cell_magic("hlo", "-f --show assignment,timeline", ADD_MUL)
    assert builds == []
    text = result.report_text()
    assert "kernels are built at the first run" in text and "Allocations" in text
    assert result._repr_mimebundle_()["image/png"].startswith(b"\x89PNG")
    assert builds == []
    add_mul = ip.user_ns["add_mul"]
    x, y = np.ones((4, 8), np.float32), np.full((4, 8), 2, np.float32)
    out = add_mul(x, y)
    np.testing.assert_array_equal(out[0], (x + y) * y)
    assert len(builds) == 1
    add_mul(x, y)
    assert len(builds) == 1 and add_mul.is_built


def test_showing_the_kernels_generates_them_but_builds_nothing(ip, builds):
    result = ip.run_cell_magic("hlo", "-f --show kernels", ADD_MUL)
    assert "__kernel void" in result.report_text() and builds == []


def test_run_builds_once(ip, builds):
    ip.user_ns.update(x=np.ones((4, 8), np.float32), y=np.ones((4, 8), np.float32))
    result = ip.run_cell_magic("hlo", "-f --run x y", ADD_MUL)
    assert len(builds) == 1 and "compiled in" in result.report_text()


ELIDED = """HloModule elided

ENTRY main {
  p = f32[16] parameter(0)
  c = f32[16] constant({...})
  ROOT a = f32[16] add(p, c)
}
"""


def test_a_module_with_elided_constants_is_analysed_without_building(ip, builds):
    result = ip.run_cell_magic("hlo", "-f", ELIDED)
    assert builds == [] and result.memory_stats.argument == 64
    ip.user_ns["x"] = np.arange(16, dtype=np.float32)
    with pytest.raises(runtime.HloUnsupportedError, match="printed elided"):
        ip.run_cell_magic("hlo", "-f --run x", ELIDED)
    assert builds == []


def test_elided_constants_run_with_an_explicit_fill_and_the_report_says_so(ip, builds):
    ip.user_ns["x"] = np.arange(16, dtype=np.float32)
    result = ip.run_cell_magic("hlo", "-f --run x --elided zeros", ELIDED)
    np.testing.assert_array_equal(result.outputs, np.arange(16, dtype=np.float32))
    assert len(builds) == 1
    assert "filled with zeros: the outputs are not the model's" in result.report_text()
    other = ip.run_cell_magic("hlo", "-f --run x --elided random", ELIDED)
    assert not np.array_equal(other.outputs, result.outputs)


# --- made-up inputs -------------------------------------------------------------------------

MLP = (REPO / "notebooks" / "modules" / "mlp_forward.hlo").read_text()


def test_run_random_runs_a_shipped_module_on_seeded_inputs(ip):
    """The inputs are ``runtime.random_arguments``'s for the seed (so the outputs are
    checked against numpy on them), the same seed gives the same outputs, another seed others."""
    result = ip.run_cell_magic("hlo", "--run random --seed 3", MLP)
    x, w1, b1, w2, b2 = runtime.random_arguments(result.executable, seed=3)
    expected = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(result.outputs, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(expected).max() > 0.01
    again = ip.run_cell_magic("hlo", "--run random --seed 3 -q -o again", MLP)
    np.testing.assert_array_equal(ip.user_ns["again"].outputs, result.outputs)
    seed0 = ip.run_cell_magic("hlo", "--run random", MLP)
    np.testing.assert_array_equal(seed0.outputs, ip.user_ns["jit_mlp_forward"](
        *runtime.random_arguments(MLP)))
    assert not np.allclose(seed0.outputs, result.outputs)
    assert again is None


def test_run_zeros_and_a_variable_named_like_the_word(ip):
    result = ip.run_cell_magic("hlo", "--run zeros", INCREMENT)
    assert float(result.outputs) == 1.0
    ip.user_ns["zeros"] = np.float32(5)
    with pytest.raises(UsageError, match=r"--run zeros: the notebook has a variable named "
                                         r"'zeros'.*pass the variable with -i zeros"):
        ip.run_cell_magic("hlo", "--run zeros", INCREMENT)
    assert float(ip.run_cell_magic("hlo", "-i zeros", INCREMENT).outputs) == 6.0
    ip.user_ns["zeros"] = np.zeros       # a function is no input: the word wins
    assert float(ip.run_cell_magic("hlo", "--run zeros", INCREMENT).outputs) == 1.0


def test_donating_a_parameter_nothing_can_alias_is_a_warning_in_the_report(ip):
    ip.user_ns.update(a=np.ones((4, 8), np.float32), b=np.ones((4, 8), np.float32))
    result = ip.run_cell_magic("hlo", "--run a b --donate y", ADD_MUL)
    assert result.warnings == ("--donate: parameter 1 (y) cannot be donated, so its buffer is "
                               "kept: no input_output_alias or buffer_donor entry names this "
                               "parameter, so no output can live in its buffer",)
    assert any(line.split() == ["warning", *result.warnings[0].split()]
               for line in result.report_text().splitlines())
    assert ip.run_cell_magic("hlo", "--run a b --donate all", ADD_MUL).warnings == ()
    assert ip.run_cell_magic("hlo", "--run a b --donate x", ADD_MUL).warnings == ()


# --- errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("line, cell, message", [
    ("--bogus", INCREMENT, "unknown option --bogus (options: --run, --seed, --inputs,"),
    ("--shwo hlo", INCREMENT, "unknown option --shwo: did you mean --show?"),
    ("--run x --donatte 0", INCREMENT, "unknown option --donatte: did you mean --donate?"),
    ("--seed 3", INCREMENT, "--seed 3 is the seed of --run random's inputs"),
    ("--show everything", INCREMENT, "--show 'everything': expected a comma-separated list of "
                                     "hlo, assignment, timeline, annotated, kernels, panel, none"),
    ("--show none,hlo", INCREMENT, "'none' cannot be combined"),
    ("", "   \n", "%%hlo needs an HLO module in the cell body"),
    ("--run missing", INCREMENT, "--run: no variable named 'missing' in the notebook"),
])
def test_misuse_is_one_usage_error_line(ip, line, cell, message):
    result, cap = run(ip, f"%%hlo {line}\n{cell}")
    assert type(result.error_in_exec) is UsageError
    assert message in cap.stderr
    assert "Traceback" not in cap.stderr + cap.stdout


def test_a_missing_variable_suggests_similar_names(ip):
    ip.user_ns["inputs"] = 1.0
    with pytest.raises(UsageError, match=r"no variable named 'input' in the notebook; "
                                         r"did you mean inputs\?"):
        ip.run_cell_magic("hlo", "-i input", INCREMENT)


def test_program_errors_show_the_short_located_message(ip):
    result, cap = run(ip, "%%hlo\nHloModule m\nENTRY e {\n  ROOT c = f32[ constant(1)\n}\n")
    assert isinstance(result.error_in_exec, runtime.HloParseError)
    lines = [line for line in cap.stdout.splitlines() if line.strip()]
    assert lines == ["line 3:17, in computation e", "    ROOT c = f32[ constant(1)",
                     "                  ^",
                     "HloParseError: expects dimension size but sees 'constant'"]


def test_a_wrong_argument_names_the_signature(ip):
    ip.user_ns["v"] = np.zeros(3, np.float32)
    result, cap = run(ip, "%%hlo --run v\n" + INCREMENT)
    assert isinstance(result.error_in_exec, runtime.HloArgumentError)
    last = [line for line in cap.stdout.splitlines() if line.strip()][-1]
    assert last.startswith("HloArgumentError: argument 0 (p) must be f32[], but got f32[3]")
    assert "expects (p: f32[]) -> f32[]" in last


def test_full_traceback_brings_back_the_python_traceback(ip):
    ip.run_line_magic("config", "HloMagics.full_traceback = True")
    result, cap = run(ip, "%%hlo\nHloModule m\nENTRY e {\n  ROOT c = f32[ constant(1)\n}\n")
    assert isinstance(result.error_in_exec, runtime.HloParseError)
    assert "parser.py" in cap.stdout and "magics.py" in cap.stdout


def test_our_own_bugs_keep_their_full_traceback(ip, monkeypatch):
    import hlo_magic.outcome

    def broken(assignment):
        raise KeyError("a bug in hlo_magic")
    monkeypatch.setattr(hlo_magic.outcome, "describe_parameters", broken)
    result, cap = run(ip, "%%hlo\n" + INCREMENT)
    assert isinstance(result.error_in_exec, KeyError)
    assert "outcome.py" in cap.stdout and "a bug in hlo_magic" in cap.stdout


def test_a_configured_device_is_kept_when_there_is_no_opencl(ip, monkeypatch):
    """Loading from a config that names a device must not fail on a machine without OpenCL."""
    def no_opencl(*args):
        raise runtime.DeviceError("OpenCL is not available")
    monkeypatch.setattr(runtime, "get_device", no_opencl)
    monkeypatch.setattr(runtime, "devices", no_opencl)
    ip.run_line_magic("config", "HloMagics.device = 'gpu'")
    assert instances(ip)[0].device == "gpu"
    result, cap = run(ip, "%%hlo\n" + INCREMENT)
    assert isinstance(result.error_in_exec, runtime.DeviceError)
    assert "DeviceError: OpenCL is not available" in cap.stdout


def test_figure_theme_setting_reaches_the_figures(ip):
    from hlo_magic.themes import figure_theme
    ip.run_line_magic("config", "HloMagics.figure_theme = 'dark'")
    try:
        assert figure_theme() == "dark"
        result = ip.run_cell_magic("hlo", "--show none -o r", INCREMENT) or ip.user_ns["r"]
        assert result.live_bytes().get_facecolor()[3] == 0
    finally:
        ip.run_line_magic("config", "HloMagics.figure_theme = 'light'")
    assert figure_theme() == "light"
