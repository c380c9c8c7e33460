"""``HloMagics``: ``%%hlo``, ``%hlo_jax``, ``%hlo_devices`` and ``%%hlo_custom_call``, with their
settings.

The magics turn a line and a cell into calls to ``runtime``'s public API and wrap what comes
back for display; every decision about HLO, memory or devices is the runtime's. Three tiers
of errors: misuse of a magic is one ``UsageError`` line; mistakes in the user's program are
the runtime's ``HloError`` classes, whose short ``_render_traceback_`` IPython shows instead
of a traceback (``HloMagics.full_traceback = True`` brings the traceback back); anything
else is our bug and keeps its full traceback.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any, Iterator

from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics, cell_magic, line_cell_magic, line_magic, magics_class, no_var_expand,
)
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display
from traitlets import Bool, Enum, Float, Int, TraitError, Unicode, observe, validate

import runtime

from .arguments import (
    SHOW_VALUES, check_identifier, evaluate_call, lookup, lookup_function, made_up_inputs,
    parse_donate, parse_line, parse_show, per_device, python_name, split_names,
)
from .custom_calls import Registration, register_host, register_opencl
from .devices import DeviceTable
from .jax_programs import jax_program, not_a_program, report
from .outcome import make_result
from .progress import NotebookProgress
from .result import HloResult
from .themes import set_figure_theme
from .tracebacks import render as render_error
from .tracebacks import user_frames

_MODULE_NAME = re.compile(r"HloModule\s+([^\s,]+)")


@magics_class
class HloMagics(Magics):
    """hlo-magic's notebook magics. Settings: ``%config HloMagics``."""

    device = Unicode("", help="OpenCL device %%hlo uses when a cell gives no --device: cpu, "
                              "gpu, gpu:1, pocl, ... ('' means $HLO_DEVICE, else PoCL on "
                              "the CPU). See %hlo_devices.").tag(config=True)
    alignment = Int(0, help="Byte alignment of every buffer offset (0 means the device's "
                            "base-address alignment, 128 on PoCL); a power of two."
                    ).tag(config=True)
    default_show = Unicode("assignment", help="What %%hlo shows when a cell gives no --show: a "
                                              f"comma-separated list of {', '.join(SHOW_VALUES)}."
                           ).tag(config=True)
    max_table_rows = Int(25, help="Rows shown per report table; the rest are counted "
                                  "('... 143 more buffers') and stay on the result object."
                         ).tag(config=True)
    timeline_max_buffers = Int(40, help="Buffers drawn one by one in the packing map; smaller "
                                        "ones are lumped into one grey 'other' layer."
                               ).tag(config=True)
    full_traceback = Bool(False, help="Show the full Python traceback for errors in HLO "
                                      "programs instead of the short located message."
                          ).tag(config=True)
    figure_theme = Enum(("light", "dark"), "light",
                        help="Colours of the memory figures: 'light' (black on white) or "
                             "'dark' (light ink on a transparent background, for dark "
                             "notebook themes).").tag(config=True)
    progress_after = Float(1.0, help="Seconds a cold compile runs before kernel-build progress "
                                     "is shown.").tag(config=True)

    @validate("device")
    def _check_device(self, proposal) -> str:
        """A spec must match a device; without any OpenCL it is kept (loading the extension
        must not fail), and the first ``%%hlo`` says what to install."""
        spec = proposal["value"]
        if spec:
            try:
                self._resolve_device(spec, "HloMagics.device", error=TraitError)
            except runtime.DeviceError:
                pass
        return spec

    _terms_explained = False   # the glossary is open in the first report of a session only

    @property
    def _namespace(self) -> dict[str, Any]:
        """The notebook's variables: IPython gives magics their shell when it loads them."""
        if self.shell is None:
            raise UsageError("the hlo magics run inside an IPython shell")
        return self.shell.user_ns


    @observe("figure_theme")
    def _use_figure_theme(self, change) -> None:
        set_figure_theme(change["new"])

    @validate("alignment")
    def _check_alignment(self, proposal) -> int:
        value = proposal["value"]
        if value < 0 or (value and value & (value - 1)):
            raise TraitError(f"HloMagics.alignment = {value}: expected 0 (the device's) or a "
                             "power of two such as 128")
        return value

    @validate("default_show")
    def _check_default_show(self, proposal) -> str:
        try:
            parse_show(proposal["value"], "HloMagics.default_show")
        except UsageError as error:
            raise TraitError(str(error)) from None
        return proposal["value"]

    @validate("max_table_rows", "timeline_max_buffers")
    def _check_positive(self, proposal) -> int:
        if proposal["value"] < 1:
            raise TraitError(f"HloMagics.{proposal['trait'].name} = {proposal['value']}: "
                             "expected a positive number")
        return proposal["value"]

    @validate("progress_after")
    def _check_progress_after(self, proposal) -> float:
        if proposal["value"] < 0:
            raise TraitError(f"HloMagics.progress_after = {proposal['value']}: expected "
                             "seconds >= 0")
        return proposal["value"]

    # --- %%hlo ------------------------------------------------------------------------------
    @no_var_expand
    @magic_arguments("%hlo")
    @argument("--run", nargs="*", metavar="NAME", default=None,
              help="run the module with these notebook variables as parameters 0, 1, ... and "
                   "show the outputs (a module without parameters: --run alone); --run "
                   "random or --run zeros makes inputs of the parameters' shapes and dtypes")
    @argument("--seed", type=int, default=None, metavar="N",
              help="the seed of --run random's inputs (default 0)")
    @argument("-i", "--inputs", metavar="A,B", default=None,
              help="the same as --run A B, comma-separated")
    @argument("--donate", default="", metavar="IDX|NAME,...",
              help="parameters to donate, by number or name (0,2 or w,g), or 'all': their "
                   "buffers hold the aliased outputs (updated in place) instead of being "
                   "copied first")
    @argument("--device", metavar="SPEC", default=None,
              help="OpenCL device for this cell: cpu, gpu, gpu:1, pocl, ... (see %%hlo_devices)")
    @argument("--show", metavar="WHAT", default=None,
              help=f"what to show, comma-separated: {', '.join(SHOW_VALUES)} (default: "
                   "HloMagics.default_show; the summary, parameters and memory always)")
    @argument("-o", "--out", metavar="NAME", default=None,
              help="bind the result object (outputs, buffer assignment, figures) to NAME")
    @argument("--elided", choices=("zeros", "random"), default=None,
              help="run a module whose constants were printed elided as {...} with zeros or "
                   "random values in them (for timing and memory: the outputs are not the "
                   "model's)")
    @argument("-f", "--force", action="store_true",
              help="compile again even if this module was compiled before (ignore the cache)")
    @argument("-q", "--quiet", action="store_true", help="display nothing and return nothing")
    @cell_magic
    def hlo(self, line: str, cell: str):
        """Analyse the HLO module in the cell, show its buffer assignment, and run it if asked.

        The report comes from the analysis at once; the kernels are built at the module's
        first run (here with ``--run``, or when it is called later), with progress shown then.

        The compiled module is bound under its name, like a ``def``: after
        ``HloModule increment`` you can call ``increment(41.0)`` in the next cell.

        Examples::

            %%hlo --run x
            HloModule increment
            ENTRY e {
              p = f32[] parameter(0)
              c = f32[] constant(1)
              ROOT out = f32[] add(p, c)
            }

        runs ``increment`` on the notebook variable ``x`` and shows the output;
        ``%%hlo --run x --donate 0`` does the same with parameter 0 donated (with
        ``input_output_alias={ {}: 0 }`` in the header, the output is written in place);
        ``%%hlo --show assignment,timeline -o r`` shows only the buffer assignment and the
        memory timeline and binds the result to ``r`` (``r.outputs``, ``r.assignment``,
        ``r.memory_stats``, ``r.figure()``, ``r.panel()``).

        Inputs: ``--run A B`` or ``-i A,B`` name notebook variables (numpy arrays, numbers,
        nested lists, or device arrays); ``--run random`` (``--seed N``) or ``--run zeros``
        makes them (``runtime.random_arguments``). A partitioned module (``num_partitions``
        above 1) runs on every device (``run_spmd``): a named value that is a list of one
        array per device is split among them, any other is every device's; ``--run random``
        gives each partition its own shard of a tiled parameter and the same values of a
        replicated one (``runtime.random_device_arguments``).
        Donation: ``--donate 0,2``, ``--donate w`` (by name) or ``--donate all``.
        Display: ``--show hlo|assignment|timeline|annotated|kernels|panel|none``
        (comma-separated), ``-q`` for nothing. Build: ``--device SPEC``, ``-f`` to ignore the
        compile cache, ``--elided zeros|random`` to run a module whose constants were printed
        as ``{...}``.
        Settings (default device, alignment, table sizes): ``%config HloMagics``.
        """
        opts = parse_line(self.hlo, line)
        if opts.show is not None:
            show = parse_show(opts.show)
        else:
            show = parse_show(self.default_show, "HloMagics.default_show")
        if not cell.strip():
            raise UsageError("%%hlo needs an HLO module in the cell body (starting with "
                             "'HloModule NAME')")
        if opts.run is not None and opts.inputs is not None:
            raise UsageError("give the inputs either with --run A B or with -i A,B, not both")
        out_name = check_identifier(opts.out, "-o") if opts.out else None
        will_run = opts.run is not None or opts.inputs is not None
        made_up = made_up_inputs(opts.run, opts.seed, self._namespace)
        flag = "--run" if opts.run is not None else "-i"
        args = [] if made_up else lookup(self._namespace, opts.run or split_names(opts.inputs),
                                         flag)
        device = self._cell_device(opts.device)
        progress = NotebookProgress(_module_name(cell), self.progress_after)
        with self._program_errors():
            exe = runtime.compile(cell, device=device, alignment=self.alignment or None,
                                  force=opts.force, lazy=True, elided_constants=opts.elided)
        exe.progress = progress
        seed = 0 if opts.seed is None else opts.seed
        devices = exe.device_count
        if made_up == "random":
            args = exe.random_arguments(seed) if devices == 1 else \
                runtime.random_device_arguments(exe, seed)
        elif made_up == "zeros":
            args = exe.zeros_arguments() if devices == 1 else \
                [exe.zeros_arguments() for _ in range(devices)]
        elif devices > 1:
            args = per_device(args, devices)
        donated = parse_donate(opts.donate, exe.parameter_names)
        bound_as = python_name(exe.name)
        shown = not opts.quiet and "none" not in show
        every = opts.donate.strip() in ("all", "*")      # not one by one: no warnings
        with self._program_errors():
            result = make_result(exe, donated, args if will_run else None,
                                 named=frozenset() if every else donated, bound_as=bound_as,
                                 show=show,
                                 max_table_rows=self.max_table_rows,
                                 timeline_max_buffers=self.timeline_max_buffers,
                                 explain_terms=shown and not self._terms_explained)
        self._namespace[bound_as] = exe
        self._terms_explained |= shown
        if out_name:
            self._namespace[out_name] = result
        if opts.quiet or (show == ("none",) and out_name):
            return None
        return self._display(result)

    # --- %hlo_jax ---------------------------------------------------------------------------
    @no_var_expand
    @line_magic
    def hlo_jax(self, line: str) -> HloResult | None:
        """The %%hlo report and run of a JAX program: ``%hlo_jax f(x, y)`` for a jitted
        function ``f`` called on notebook values (also a ``jax.stages.Lowered`` or
        ``Compiled``, called on its non-static arguments), donating what ``f``'s
        ``donate_argnums`` donates. ``r = %hlo_jax f(x, y)`` keeps the result;
        ``hlo_magic.from_jax(f, x, y)`` is the same outside the magic.
        """
        fn, args, kwargs = evaluate_call(line, self._namespace, "%hlo_jax")
        problem = not_a_program(fn)
        if problem:
            raise UsageError(f"%hlo_jax {line.strip()}: {problem}")
        show = parse_show(self.default_show, "HloMagics.default_show")
        device = self._cell_device(None)
        with self._program_errors():
            program = jax_program(fn, args, kwargs)
            result = report(program, device=device, alignment=self.alignment or None,
                            progress=NotebookProgress("the JAX program", self.progress_after),
                            show=show, max_table_rows=self.max_table_rows,
                            timeline_max_buffers=self.timeline_max_buffers,
                            explain_terms="none" not in show and not self._terms_explained)
        self._terms_explained |= "none" not in show
        return self._display(result)

    def _display(self, result: HloResult) -> HloResult | None:
        """The report, and the live timeline and donation panel after it where asked for
        (returned, a result displays itself; the widgets need ``display``)."""
        show = result.show
        live_timeline = "timeline" in show and getattr(self.shell, "kernel", None) is not None
        if "panel" in show or live_timeline:
            display(replace(result, show=tuple(s for s in show if s != "timeline"))
                    if live_timeline else result)
            if live_timeline:
                display(result.timeline())
            if "panel" in show:
                display(result.panel())
            return None
        return result

    # --- %hlo_devices -----------------------------------------------------------------------
    @line_magic
    def hlo_devices(self, line: str) -> DeviceTable:
        """List the OpenCL devices %%hlo can use, with their specs for --device."""
        if line.strip():
            raise UsageError(f"%hlo_devices takes no arguments, got {line.strip()!r}")
        with self._program_errors():
            found = runtime.devices()
            default = runtime.get_device(self.device or None) if found else None
            reasons = runtime.device_reasons(self.device or None) if found else {}
        return DeviceTable(found, default, reasons)

    # --- %%hlo_custom_call ------------------------------------------------------------------
    @no_var_expand
    @magic_arguments("%hlo_custom_call")
    @argument("target", help="the custom_call_target the HLO names")
    @argument("--kernel", metavar="NAME", default=None,
              help="the __kernel function to launch (default: the only one in the cell)")
    @argument("--launcher", metavar="FUNCTION", default=None,
              help="a notebook function fn(queue, buffers, opaque, status) that enqueues the "
                   "work itself (XLA's GPU convention); the cell's source is optional then")
    @argument("--host", metavar="FUNCTION", default=None,
              help="register the notebook function FUNCTION (line form, no cell): called as "
                   "fn(out, ins) with numpy arrays (XLA's CPU convention; the module's "
                   "api_version adds status and opaque)")
    @line_cell_magic
    def hlo_custom_call(self, line: str, cell: str | None = None) -> Registration:
        """Register a custom-call target: the cell's OpenCL C source, or a host function.

        Examples::

            %%hlo_custom_call do_custom_call
            __kernel void custom_call_kernel(__global const float* in0,
                                             __global const float* in1,
                                             __global float* out) {
              size_t i = get_global_id(0);
              out[i] = in0[i % 128] + in1[i];
            }

        registers an OpenCL kernel: its arguments are the operands' leaf buffers then the
        outputs' (XLA's GPU convention), and it is launched over the first output's elements.
        The source is built at once, so a compile error shows here.
        ``%%hlo_custom_call do_custom_call --launcher launch`` also hands the launch to the
        notebook function ``launch(queue, buffers, opaque, status)``.
        ``%hlo_custom_call do_custom_call --host do_custom_call`` registers the notebook
        function ``do_custom_call(out, ins)`` instead (XLA's CPU convention, numpy arrays).
        Registering a target again replaces it.
        """
        opts = parse_line(self.hlo_custom_call, line)
        if opts.host is not None and (cell is not None or opts.kernel or opts.launcher):
            raise UsageError("--host registers a notebook function on its own: use the line "
                             f"magic %hlo_custom_call {opts.target} --host {opts.host} (no cell "
                             "body, no --kernel or --launcher)")
        if opts.host is None and opts.launcher is None and cell is None:
            raise UsageError("%hlo_custom_call needs OpenCL C source in a cell (%%hlo_custom_call "
                             "TARGET), a launcher (--launcher FN) or a host function (--host FN)")
        if cell is not None and not cell.strip():
            raise UsageError(f"%%hlo_custom_call {opts.target}: the cell is empty; write the "
                             "OpenCL C source of the kernel in it")
        with self._program_errors():
            if opts.host is not None:
                return register_host(opts.target,
                                     lookup_function(self._namespace, opts.host, "--host"))
            launcher = None
            if opts.launcher is not None:
                launcher = lookup_function(self._namespace, opts.launcher, "--launcher")
            return register_opencl(opts.target, cell, opts.kernel, launcher,
                                   self._cell_device(None) or runtime.get_device())

    # --- helpers ----------------------------------------------------------------------------
    def _cell_device(self, spec: str | None):
        if spec:
            return self._resolve_device(spec, "--device", error=UsageError)
        if self.device:
            return self._resolve_device(self.device, "HloMagics.device", error=UsageError)
        return None

    @staticmethod
    def _resolve_device(spec: str, flag: str, *, error: type[Exception]):
        """The device ``spec`` names; a spec that matches nothing is the user's mistake, but
        having no OpenCL at all is not, so that stays the runtime's ``DeviceError``."""
        try:
            return runtime.get_device(spec)
        except runtime.DeviceError:
            found = runtime.devices()
            if not found:
                raise
            listing = ", ".join(f"{d.spec} ({d})" for d in found)
            raise error(f"{flag} {spec!r}: no OpenCL device matches; devices: {listing}") \
                from None

    @contextmanager
    def _program_errors(self) -> Iterator[None]:
        """An ``HloError`` renders short, after the user's own frames when the user's code
        raised it; with ``full_traceback`` on, as an ordinary traceback after those frames."""
        try:
            yield
        except runtime.HloError as error:
            if self.full_traceback or user_frames(error) is not None:
                # this error's own rendering (a method of HloError, replaced per instance)
                setattr(error, "_render_traceback_", partial(render_error, self.shell, error,
                                                             full=self.full_traceback))
            raise


def _module_name(text: str) -> str:
    """The name in the header, for the progress line shown before the module is parsed."""
    match = _MODULE_NAME.search(text)
    return match.group(1) if match else "module"
