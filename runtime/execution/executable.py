"""Executables: run a compiled module's plan over real device buffers, with donation.

Each run binds every allocation of the buffer assignment to one device buffer: parameter
allocations to the arguments' buffers, output allocations to fresh buffers, the temp arena and
the constants to buffers the executable owns. An output aliased to a parameter lives in that
parameter's allocation: when the caller donates the argument, its buffer is updated in place
and the caller's ``DeviceArray`` is deleted; otherwise the allocation gets a fresh buffer
filled from the input first (copy-protection), so the caller's input is never written.

A run that fails (a custom call's failure, a device error) releases what it allocated and
returns nothing; undonated inputs are untouched because nothing ever writes to them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..buffers.donation_spec import resolve_donation
from ..analysis.device_groups import DeviceGrid
from ..errors import DeviceError, HloArgumentError, HloUnsupportedError
from ..hlo.dtypes import ElementType, from_numpy
from ..hlo.sample_values import sample_arguments
from ..hlo.shape import ArrayShape, Shape, TupleShape, physical_order
from .arrays import DeviceArray, upload
from ..opencl.device import allocate_buffer, opencl
from ..passes.dynamic_padding import dynamic_output_dims
from .output_buffers import OutputRecycler
from .kernel_builds import KernelBuild
from .spmd import DEFAULT_TIMEOUT, run_spmd

if TYPE_CHECKING:
    from ..codegen.plan import Launch

_RUN_COUNTER = itertools.count(1)


# --- run records ----------------------------------------------------------------------------

@dataclass
class RunRecord:
    """What a run did with its arguments (``exe.last_run``)."""

    name: str
    donated: tuple[int, ...] = ()
    copied: tuple[int, ...] = ()
    unusable: dict[int, str] = field(default_factory=dict)
    copied_bytes: int = 0
    seconds: float = 0.0

    def __repr__(self) -> str:
        return (f"RunRecord({self.name}: donated={list(self.donated)}, "
                f"copied={list(self.copied)}, unusable={self.unusable})")


@dataclass
class DonationPlan:
    donated: tuple[int, ...]
    copied: frozenset[int]        # allocations that get copy-protection this run


# --- the executable -------------------------------------------------------------------------

class Executable:
    """A compiled module: its ``analysis`` (the memory plan), and kernels that ``build`` makes
    (``compile`` calls it, unless ``lazy``; else the first run does, reporting to
    ``progress``). ``elided_constants`` is "zeros" or "random" when constants printed as
    ``{...}`` were given such values: the outputs are then not the model's."""

    def __init__(self, module, analysis, device, build, *, elided_constants: str | None = None,
                 progress=None, cache_hit: bool = False, upgrade=None) -> None:
        self.module = module
        self.analysis = analysis
        assignment = analysis.buffer_assignment
        self.buffer_assignment = assignment
        self.device = device
        self._build = build
        # tier "auto": the tier-1 build made in the background once ``build`` is built, and
        # swapped in at the first run after it is (``_upgraded``)
        self._upgrade = upgrade
        self._kernels: dict = {}
        self.elided_constants = elided_constants
        self.progress = progress
        self.cache_hit = cache_hit
        self.name = module.name
        self.last_run: RunRecord | None = None
        self._resident = _Resident()
        self._entry_params = list(assignment.module.entry.parameters)
        self._param_allocations = self._index_parameter_allocations()
        self._recycler = OutputRecycler()
        # the iteration each enclosing counted loop is at, innermost last (``_conditional``)
        self._iterations: list[int] = []
        self._outputs = assignment.output_slices()
        # the declared result's dynamic dimensions: the dynamic-padding pass appended their
        # sizes to the outputs, which each run reads back (``_collect_outputs``)
        self._dynamic = dynamic_output_dims(module.entry.root.shape)
        # output allocations backing exactly one result array: reusable once it is dropped
        backing = [sl.allocation for sl in self._outputs.values()]
        self._recyclable = {a for a in backing if backing.count(a) == 1
                            and assignment.allocations[a].kind == "output"}
        self._arena_size = sum(a.size for a in assignment.allocations if a.kind == "temp")
        self._bytes_needed = sum(a.size for a in assignment.allocations) + sum(
            a.size for a in assignment.allocations
            if a.kind == "parameter" and a.aliased_output is not None)
        self._largest = max((a.size for a in assignment.allocations), default=0)
        # each launch step's kernel object and the arguments to set at each run (see
        # ``_bind_arguments``): step id -> (kernel, ((argument index, allocation), ...)), and
        # step id -> its kernel object once bound in the current run
        self._launch_args: dict[int, tuple] = {}
        self._bound: dict[int, Any] = {}
        self._enqueue: Any = None          # set by each run
        self._kernel_owner: dict[str, int] = {}
        self._owned = {a.index for a in assignment.allocations if a.kind in ("temp", "constant")}
        # a multi-device module's partition copies (``run_spmd``): the device this copy is and
        # how it exchanges collective data; every launch step gets a kernel object of its own
        self.communicator = None
        self._fresh_kernels = False
        # each shard_map region's body, run on every device by its host step (``run_region``)
        self._regions = {name: Executable(a.source, a, device, KernelBuild(a, device))
                         for name, a in analysis.regions.items()}

    # --- public -----------------------------------------------------------------------------
    @property
    def program(self):
        """The plan and the OpenCL C source (generated on first use)."""
        return self._build.program

    @property
    def is_built(self) -> bool:
        return self._build.built

    @property
    def tier(self) -> int:
        """0 while steps run on tier 0's generic kernels, else 1."""
        return 0 if self._build.generic is not None else 1

    def build(self, progress=None) -> Executable:
        """Build (and warm up) the kernels now, if not built yet; ``progress(stage, done,
        total)`` hears about it. Tier "auto" then starts tier 1's build on a thread, or, where
        the device cannot build the generic kernels, builds tier 1 now."""
        try:
            self._kernels = self._build.kernels(progress or self.progress)
        except DeviceError:
            if self._upgrade is None:
                raise
            self._build, self._upgrade = self._upgrade, None
            self._kernels = self._build.kernels(progress or self.progress)
        for region in self._regions.values():
            region.build(progress or self.progress)
        if self._upgrade is not None:
            self._upgrade.build_in_background()
        return self

    def _upgraded(self) -> None:
        """Run tier 1 from now on, if its background build is done: its plan, its kernels, its
        embedded blob (each launch binds its arguments again at its first launch)."""
        upgrade = self._upgrade
        if upgrade is None or not upgrade.built:
            return
        self._build, self._upgrade = upgrade, None
        self._kernels = upgrade.kernels()
        self._launch_args = {}
        self._kernel_owner = {}
        self._resident = dataclasses.replace(self._resident, embedded=None)

    def run_region(self, name: str, args: Sequence[Sequence[Any]]) -> list[Any]:
        """The outputs of shard_map region ``name``'s body on each device, ``args[d]`` being
        device d's shards (its host step's call, ``custom_calls.manual_region``)."""
        return self._regions[name].run_spmd(args)

    @property
    def compile_times(self) -> dict[str, float]:
        """Seconds per compile stage: parse, verify, passes, assignment, other (the analysis),
        then codegen, opencl-build, warm-up (PoCL compiles kernels at their first launch) and
        binary-save once built."""
        return dict(self._build.times)

    @property
    def compile_seconds(self) -> float:
        return sum(self._build.times.values())

    @property
    def memory_stats(self):
        return self.buffer_assignment.memory_stats

    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self._entry_params]

    @property
    def parameter_names(self) -> list[str]:
        """The entry's parameter names in order (``donate=`` accepts them)."""
        return [p.name for p in self._entry_params]

    @property
    def result_shape(self) -> Shape:
        """The result as the module declares it: a dynamic dimension at its bound
        (``f32[<=8]``), which each run returns at its runtime size."""
        if self._dynamic:
            return self.module.entry.root.shape
        return self.buffer_assignment.module.entry.root.shape

    def random_arguments(self, seed: int = 0) -> list:
        """Seeded random arguments of the entry's parameter shapes and dtypes, for a run whose
        inputs do not matter (memory, timing, a smoke test): ``exe(*exe.random_arguments())``.
        Floats are small normal values, integers small and non-negative (valid indices for
        most modules), tuple parameters nested tuples (``hlo.sample_values``)."""
        return sample_arguments(self._entry_params, seed)

    def zeros_arguments(self) -> list:
        """Arguments of the entry's parameter shapes and dtypes, all zeros."""
        return sample_arguments(self._entry_params, None)

    @property
    def device_count(self) -> int:
        """How many devices the module runs on (replica_count x num_partitions)."""
        return DeviceGrid.of(self.module).size

    def signature(self) -> str:
        params = ", ".join(f"{p.name}: {p.shape.to_text()}" for p in self._entry_params)
        return f"({params}) -> {self.result_shape.to_text()}"

    def __call__(self, *args):
        """numpy in, numpy out (nothing stays on the device)."""
        outputs = self.run(*args)
        return _to_numpy(outputs)

    def run(self, *args, donate: Sequence[int | str] | int | str = ()):
        """Run on the device; returns ``DeviceArray``s (a nested tuple for a tuple result).

        ``donate``: parameter numbers or names (``0``, ``"w"``, ``(0, "g")``, ``"0,2"``) or
        ``"all"``; each at most once."""
        self._check_one_device()
        record = RunRecord(name=f"{self.name}#{next(_RUN_COUNTER)}")
        donate_set = self._donation_set(donate)
        leaves = self._check_arguments(args)
        self._check_clashes(args, donate_set)
        plan = self._donation_plan(donate_set, record)
        self.build()
        self._upgraded()
        start = time.perf_counter()
        bindings, fresh = self._bind(leaves, plan, record)
        # the queue and the enqueue function once a run, not under the device lock per launch
        self._enqueue = functools.partial(opencl().enqueue_nd_range_kernel, self.device.queue)
        try:
            self._execute(self.program.plan, bindings)
            results = self._collect_outputs(bindings)
            self.device.queue.flush()
        except BaseException:
            for buf in fresh:
                buf.release()
            raise
        finally:
            self._bound.clear()
        for i in plan.donated:
            arg = args[i]
            if isinstance(arg, DeviceArray):
                arg.delete(by=record.name)
        record.seconds = time.perf_counter() - start
        self.last_run = record
        return results

    def run_spmd(self, args, *, donate: Sequence[int | str] | int | str = (),
                 timeout: float = DEFAULT_TIMEOUT) -> list:
        """Run every device of a multi-device module (``num_partitions``/``replica_count``
        above 1): ``args[p]`` is device ``p``'s argument list (``p = replica *
        num_partitions + partition``); returns ``outs[p]``, device ``p``'s outputs as ``run``
        returns them. ``donate`` applies to each device's arguments as in ``run``. The
        devices run concurrently on this executable's device and exchange data at
        collectives; ``timeout`` bounds each wait there (seconds)."""
        return run_spmd(self, args, donate=donate, timeout=timeout)

    def _check_one_device(self) -> None:
        count = self.device_count
        if count > 1 and self.communicator is None:
            key = "num_partitions" if self.module.header_attrs.get("num_partitions", 1) != 1 \
                else "replica_count"
            raise HloUnsupportedError(
                f"{self.name} runs on {count} devices ({key}={self.module.header_attrs[key]} "
                "in its HloModule header); run() runs one device, and one device's part of a "
                "partitioned or replicated program alone is not the program's answer",
                location=self.module.attribute_locations.get(key),
                hint="run every device with exe.run_spmd([args of device 0, args of device "
                     "1, ...])")

    def _partition_copy(self, communicator) -> Executable:
        """This executable as device ``communicator.rank`` of a ``run_spmd``: the built
        programs shared, everything a run binds (kernel objects, temp arena, constants,
        recycled outputs) its own, so the devices can run at the same time."""
        clone = copy.copy(self)
        clone.communicator = communicator
        clone._fresh_kernels = True
        clone._resident = _Resident()
        clone._recycler = OutputRecycler()
        clone._iterations = []
        clone._launch_args = {}
        clone._bound = {}
        clone._kernel_owner = {}
        clone.last_run = None
        return clone

    # --- arguments --------------------------------------------------------------------------
    def _donation_set(self, donate) -> frozenset[int]:
        return resolve_donation(donate, self.parameter_names)

    def _check_arguments(self, args) -> list[list[tuple[tuple[int, ...], ArrayShape, Any]]]:
        params = self._entry_params
        if len(args) != len(params):
            raise HloArgumentError(
                f"{self.name} takes {len(params)} argument(s) {self.signature()}, but "
                f"{len(args)} were passed: ({', '.join(_describe(a) for a in args)})")
        leaves = []
        for i, (arg, p) in enumerate(zip(args, params)):
            leaves.append(list(self._check_leaf(i, arg, p.shape, ())))
        return leaves

    def _check_leaf(self, i: int, arg, shape: Shape, index: tuple[int, ...]):
        where = f"argument {i}" + (f" at {{{','.join(map(str, index))}}}" if index else "")
        if shape.is_tuple:
            assert isinstance(shape, TupleShape)
            if not isinstance(arg, (tuple, list)) or len(arg) != len(shape.elements):
                raise HloArgumentError(f"{where} must be a tuple of {len(shape.elements)} arrays "
                                       f"for {shape.to_text(False)}, got {_describe(arg)}; "
                                       f"signature {self.signature()}")
            for k, (a, s) in enumerate(zip(arg, shape.elements)):
                yield from self._check_leaf(i, a, s, index + (k,))
            return
        assert isinstance(shape, ArrayShape)
        value: DeviceArray | np.ndarray
        if isinstance(arg, DeviceArray):
            arg._check_alive()
            if arg.device is not self.device:
                raise HloArgumentError(
                    f"{where} ({self._entry_params[i].name}) lives on {arg.device}, but "
                    f"{self.name} was compiled for {self.device}",
                    hint="pass a numpy array, or device_put it on the executable's device "
                         "(runtime.device_put(x, exe.device))")
            got_et, got_dims = arg.hlo_shape.element_type, arg.shape
            value = arg
        else:
            value, got_et, got_dims = _as_host_array(arg, shape.element_type, where)
        if got_et is not shape.element_type or tuple(got_dims) != shape.dims:
            raise HloArgumentError(
                f"{where} ({self._entry_params[i].name}) must be {shape.to_text(False)}, but got "
                f"{got_et.name}{list(got_dims)}; {self.name} expects {self.signature()}")
        if isinstance(value, DeviceArray) and \
                physical_order(value.hlo_shape) != physical_order(shape):
            value = np.asarray(value)   # its bytes are in another order: upload them in this one
        yield index, shape, value

    def _check_clashes(self, args, donate: frozenset[int]) -> None:
        """No donated array is passed twice (in time linear in the arguments: an Adam step
        over 96 parameters donates 288 of 290 arguments)."""
        positions: dict[int, list[int]] = {}
        for j, arg in enumerate(args):
            if not isinstance(arg, (int, float, bool)):
                positions.setdefault(id(arg), []).append(j)
        for i in sorted(donate):
            for j in positions.get(id(args[i]), ()):
                if j != i:
                    raise HloArgumentError(
                        f"argument {i} is donated but the same array is also passed as argument "
                        f"{j}; donate it at most once and do not pass it elsewhere in the same run")

    # --- donation ---------------------------------------------------------------------------
    def _index_parameter_allocations(self) -> dict[tuple[int, tuple[int, ...]], Any]:
        out = {}
        for alloc in self.buffer_assignment.allocations:
            if alloc.kind == "parameter":
                out[(alloc.parameter_number, tuple(alloc.parameter_index or ()))] = alloc
        return out

    def _donation_plan(self, donate: frozenset[int], record: RunRecord) -> DonationPlan:
        aliased_params = {num for (num, _), a in self._param_allocations.items()
                          if a.aliased_output is not None}
        donated: list[int] = []
        copied: dict[int, int] = {}
        for (num, idx), alloc in self._param_allocations.items():
            if alloc.aliased_output is None:
                continue
            if num in donate:
                continue
            if alloc.must_alias:
                raise HloArgumentError(
                    f"An input was configured to be must-alias at compile time but not donated "
                    f"at runtime: ({num}, {{{','.join(map(str, idx))}}}, must-alias) "
                    f"(allocation {alloc.index}); pass donate=({num},)",
                    location=self.module.attribute_locations.get("input_output_alias"))
            copied[alloc.index] = num
        for num in sorted(donate):
            if num in aliased_params:
                donated.append(num)
            else:
                record.unusable[num] = (
                    f"no output aliases parameter {num} ({self._entry_params[num].name}: "
                    f"{self._entry_params[num].shape.to_text(False)}); add an input_output_alias "
                    f"or buffer_donor entry whose output has the same byte size")
        record.donated = tuple(donated)
        record.copied = tuple(sorted(set(copied.values())))
        return DonationPlan(tuple(donated), frozenset(copied))

    # --- binding ----------------------------------------------------------------------------
    def _bind(self, leaves, plan: DonationPlan, record: RunRecord):
        """Device buffers for every allocation this run; also returns the ones to free if the
        run fails. A freshly uploaded numpy argument is already a private copy, so it needs no
        second copy for copy-protection."""
        cl = opencl()
        dev = self.device
        assignment = self.buffer_assignment
        bindings: list[Any] = [None] * len(assignment.allocations)
        fresh: list[Any] = []
        self._check_capacity()
        for i, arg_leaves in enumerate(leaves):
            for index, shape, value in arg_leaves:
                alloc = self._param_allocations.get((i, index))
                if alloc is None:
                    continue
                if not isinstance(value, DeviceArray):
                    buf = upload(dev, value, shape, f"argument {i}")
                    fresh.append(buf)
                    if alloc.index in plan.copied:
                        record.copied_bytes += alloc.size
                else:
                    buf = value.buffer
                if isinstance(value, DeviceArray) and alloc.index in plan.copied:
                    protected = allocate_buffer(dev, alloc.size, f"copy-protection of argument {i}")
                    fresh.append(protected)
                    if alloc.size:
                        cl.enqueue_copy(dev.queue, protected, buf, byte_count=alloc.size)
                    record.copied_bytes += alloc.size
                    buf = protected
                bindings[alloc.index] = buf
        for alloc in assignment.allocations:
            if alloc.kind == "output":
                buf = self._recycler.take(alloc.index) or allocate_buffer(
                    dev, alloc.size, f"output allocation {alloc.index}")
                fresh.append(buf)
                bindings[alloc.index] = buf
            elif alloc.kind == "temp":
                bindings[alloc.index] = self._arena_buffer(alloc, self._arena_size)
            elif alloc.kind == "constant":
                bindings[alloc.index] = self._constant_buffer(alloc)
        return bindings, fresh

    def _check_capacity(self) -> None:
        available = self.device.global_mem_bytes
        if self._bytes_needed > available:
            raise DeviceError(f"{self.name} needs {self._bytes_needed} bytes of device memory, "
                              f"but {self.device} has {available} bytes",
                              **self._largest_value_site())
        if self._largest > self.device.max_alloc_bytes:
            raise DeviceError(f"{self.name} needs a single buffer of {self._largest} bytes, but "
                              f"{self.device} allows at most {self.device.max_alloc_bytes} "
                              f"bytes per buffer", **self._largest_value_site())

    def _largest_value_site(self) -> dict[str, Any]:
        """Where the module outgrows the device: the instruction defining the largest value,
        with its line, so the error points at the shape to shrink rather than at the module."""
        values = [v for a in self.buffer_assignment.allocations for b in a.buffers
                  for v in b.values]
        if not values:
            return {}
        inst = max(values, key=lambda v: v.size).instruction
        return {"location": inst.location, "instruction": inst.name}

    def _arena_buffer(self, alloc, arena_size: int):
        """One arena per executable; temp allocations are laid end to end inside it."""
        resident = self._resident
        if resident.arena is None:
            resident.arena = {}
            base = resident.arena_base = allocate_buffer(self.device, arena_size,
                                                         "the temp arena")
            offset = 0
            align = self.device.mem_base_addr_align
            for a in self.buffer_assignment.allocations:
                if a.kind == "temp":
                    resident.arena[a.index] = _sub_buffer(base, offset, a.size)
                    offset += -(-a.size // align) * align
        return resident.arena[alloc.index]

    def _constant_buffer(self, alloc):
        buf = self._resident.constants.get(alloc.index)
        if buf is None:
            inst = alloc.constant
            data = np.asarray(inst.literal.data, dtype=inst.shape.element_type.numpy)
            buf = upload(self.device, data, inst.shape, f"constant {inst.name}")
            self._resident.constants[alloc.index] = buf
        return buf

    def _embedded_buffer(self):
        resident = self._resident
        if resident.embedded is None:
            cl = opencl()
            blob = self.program.embedded
            resident.embedded = allocate_buffer(self.device, len(blob), "embedded constants")
            if blob:
                cl.enqueue_copy(self.device.queue, resident.embedded,
                                np.frombuffer(blob, dtype=np.uint8), is_blocking=True)
        return resident.embedded

    # --- the plan ---------------------------------------------------------------------------
    def _buffer(self, bindings, ref):
        if ref.allocation < 0:
            return self._embedded_buffer()
        return bindings[ref.allocation]

    def _execute(self, steps, bindings) -> None:
        for step in steps:
            runner = _STEP_RUNNERS[type(step).__name__]
            runner(self, step, bindings)

    def _launch(self, step, bindings) -> None:
        """Enqueue a launch step. A step launched before in this run (a loop body's, from its
        second iteration) has its arguments set already: a run's bindings never change, so it
        is only enqueued (the LSTM's 1,800 launches a run spent more time in Python than its
        small kernels took to run)."""
        kernel = self._bound.get(id(step))
        if kernel is None:
            kernel = self._bind_arguments(step, bindings)
        self._enqueue(kernel, step.global_size, step.local_size)

    def _bind_arguments(self, step: Launch, bindings: list[Any]) -> Any:
        """Set only the arguments that can change between runs. Each launch step has a kernel
        object of its own (steps sharing a deduplicated kernel would otherwise set every
        argument at each launch: a loop body's thirteen in-place updates through one kernel
        spent more time there than running), so its scalars and offsets and the executable's
        own buffers (temp arena, constants, embedded blob) are set once, at its first launch,
        which also records the arguments left to set: the parameters' and outputs' buffers.
        Those are set again in every run, compared with nothing: a released buffer's
        ``cl_mem`` handle is reused by the next allocation while the kernel may still point
        at the released memory (Oclgrind caught kernels writing there when handles were
        compared), and holding the buffers between runs would keep memory the caller freed.
        A run of a straight-line program binds each of its launches once, so this is most of
        the host's time a launch (an Adam step over 96 tensors: 335 launches, 2.5 ms of
        Python a run when every argument was looked up and compared)."""
        key = id(step)
        recipe = self._launch_args.get(key)
        if recipe is None:
            kernel = self._step_kernel(step)
            args: list = []
            for ref in step.buffers:
                args += [self._buffer(bindings, ref), np.uint64(ref.offset)]
            kernel.set_args(*args, *step.scalars)
            self._launch_args[key] = (kernel, tuple(
                (2 * k, ref.allocation) for k, ref in enumerate(step.buffers)
                if ref.allocation >= 0 and ref.allocation not in self._owned))
        else:
            kernel, varying = recipe
            set_arg = kernel.set_arg
            for index, allocation in varying:
                set_arg(index, bindings[allocation])
        self._bound[key] = kernel
        return kernel

    def _step_kernel(self, step):
        """The built kernel for the plan's first step that launches it, a new kernel object of
        the same program for every other step (PoCL keeps the compiled code per program)."""
        built = self._kernels[step.kernel]
        if self._fresh_kernels:
            return opencl().Kernel(built.program, built.function_name)
        if step.kernel not in self._kernel_owner:
            self._kernel_owner[step.kernel] = id(step)
        if self._kernel_owner[step.kernel] == id(step):
            return built
        return opencl().Kernel(built.program, built.function_name)

    def _copy(self, step, bindings) -> None:
        cl = opencl()
        if step.nbytes:
            cl.enqueue_copy(self.device.queue, self._buffer(bindings, step.dst),
                            self._buffer(bindings, step.src), byte_count=step.nbytes,
                            src_offset=step.src.offset, dst_offset=step.dst.offset)

    def _fill(self, step, bindings) -> None:
        cl = opencl()
        if step.nbytes:
            cl.enqueue_fill_buffer(self.device.queue, self._buffer(bindings, step.dst),
                                   np.frombuffer(step.pattern, dtype=np.uint8),
                                   step.dst.offset, step.nbytes)

    def _read_scalar(self, bindings, ref, dtype) -> Any:
        cl = opencl()
        host = np.empty(1, dtype=dtype)
        cl.enqueue_copy(self.device.queue, host, self._buffer(bindings, ref),
                        src_offset=ref.offset, is_blocking=True)
        return host[0]

    def _while(self, step, bindings) -> None:
        if step.counter_values is not None:
            for iteration in range(len(step.counter_values)):
                self._iterations.append(iteration)
                try:
                    self._execute(step.body, bindings)
                finally:
                    self._iterations.pop()
            return
        if step.chunk > 1:
            self._speculate(step, bindings)
            return
        while True:
            self._execute(step.condition, bindings)
            if not self._read_scalar(bindings, step.predicate, np.uint8):
                break
            self._execute(step.body, bindings)

    def _speculate(self, step, bindings) -> None:
        """A loop whose body's launches check the predicate: condition and body ``k`` times
        between two reads of the predicate, ``k`` doubling up to the step's chunk. Iterations
        past the end do nothing (the state stays, so the condition stays false)."""
        k = 1
        while True:
            for _ in range(k):
                self._execute(step.condition, bindings)
                self._execute(step.body, bindings)
            if not self._read_scalar(bindings, step.predicate, np.uint8):
                return
            k = min(2 * k, step.chunk)

    def _conditional(self, step, bindings) -> None:
        if step.predicated:
            for branch in step.branches:
                self._execute(branch, bindings)
            return
        if step.selected is not None:
            value = step.selected[self._iterations[-1]]
        else:
            value = self._read_scalar(bindings, step.selector,
                                      np.uint8 if step.selector_is_pred else np.int32)
        if step.selector_is_pred:
            k = 0 if value else 1
        else:
            k = int(value)
            if not 0 <= k < len(step.branches):
                k = len(step.branches) - 1       # XLA runs the last branch when out of range
        self._execute(step.branches[k], bindings)

    def _host_call(self, step, bindings) -> None:
        step.run(self, bindings)

    # --- results ----------------------------------------------------------------------------
    def _collect_outputs(self, bindings):
        """The outputs as ``DeviceArray``s; those with dynamic dimensions at their runtime
        shapes, read in one small transfer with the sizes the plan appended to the outputs
        (each output stored compact, so its array is the first bytes of its buffer)."""
        shape = self.buffer_assignment.module.entry.root.shape
        if not self._dynamic:
            return self._output_tree(bindings, shape, (), {})
        assert isinstance(shape, TupleShape)
        last = len(shape.elements) - 1
        sl = self._outputs[(last,)]
        sizes = np.empty(len(self._dynamic), dtype=np.int32)
        opencl().enqueue_copy(self.device.queue, sizes, bindings[sl.allocation],
                              src_offset=sl.offset, is_blocking=True)
        declared_tuple = self.result_shape.is_tuple
        runtime: dict[tuple[int, ...], dict[int, int]] = {}
        for (index, d), size in zip(self._dynamic, sizes):
            runtime.setdefault(index if declared_tuple else (0,), {})[d] = int(size)
        outputs = tuple(self._output_tree(bindings, e, (k,), runtime)
                        for k, e in enumerate(shape.elements[:last]))
        return outputs if declared_tuple else outputs[0]

    def _output_tree(self, bindings, s: Shape, index: tuple[int, ...],
                     runtime: dict[tuple[int, ...], dict[int, int]]):
        """The ``DeviceArray``s of the result's subshape ``s`` at ``index``; ``runtime`` has
        the runtime sizes of each leaf's dynamic dimensions."""
        if s.is_tuple:
            return tuple(self._output_tree(bindings, e, index + (k,), runtime)
                         for k, e in enumerate(s.elements))
        sl = self._outputs[index]
        size = sl.size
        if index in runtime:
            s = ArrayShape(s.element_type, tuple(runtime[index].get(d, n)
                                                 for d, n in enumerate(s.dims)))
            size = s.byte_size
        buf = bindings[sl.allocation]
        whole = not sl.offset and size == buf.size
        if not whole:
            buf = buf.get_sub_region(sl.offset, max(size, 1))
        array = DeviceArray(buf, s, self.device)
        if whole and sl.allocation in self._recyclable:
            self._recycler.watch(array, sl.allocation, buf)
        return array

    def _cache_hit_copy(self) -> Executable:
        """The same compiled executable, as returned by a compile that hit the cache."""
        clone = copy.copy(self)
        clone.cache_hit = True
        clone.last_run = None
        return clone

    def __repr__(self) -> str:
        return f"<Executable {self.name}{self.signature()} on {self.device}>"


_STEP_RUNNERS = {
    "Launch": Executable._launch, "GenericLaunch": Executable._launch,
    "CopyBytes": Executable._copy, "FillBytes": Executable._fill,
    "HostWhile": Executable._while, "HostConditional": Executable._conditional,
    "HostCall": Executable._host_call,
}


@dataclass
class _Resident:
    """The device buffers an executable keeps between runs, which its launch steps' kernel
    objects point at once their arguments are set (``_bind_arguments``): the temp arena (its
    allocations as sub-buffers), the constants, the embedded blob. The copies a cache hit
    returns share the kernel objects, so they share these too (one holder, created lazily by
    whichever runs first); with buffers of their own, a copy that ran and was dropped freed
    what the others' kernels still read."""

    arena: dict[int, Any] | None = None
    arena_base: Any = None
    constants: dict[int, Any] = field(default_factory=dict)
    embedded: Any = None


def _sub_buffer(base, offset: int, size: int):
    if offset == 0 and size == base.size:
        return base
    return base.get_sub_region(offset, max(size, 1), opencl().mem_flags.READ_WRITE)


def _to_numpy(outputs):
    if isinstance(outputs, tuple):
        return tuple(_to_numpy(o) for o in outputs)
    return np.asarray(outputs)


def _describe(arg) -> str:
    if isinstance(arg, DeviceArray):
        return arg.hlo_shape.to_text(False)
    if isinstance(arg, np.ndarray):
        try:
            return f"{from_numpy(arg.dtype).name}{list(arg.shape)}"
        except KeyError:
            return f"{arg.dtype}{list(arg.shape)}"
    if isinstance(arg, (tuple, list)):
        return "(" + ", ".join(_describe(a) for a in arg) + ")"
    return type(arg).__name__


def _as_host_array(arg, want: ElementType, where: str) -> tuple[np.ndarray, ElementType, tuple]:
    """numpy arrays must already have the parameter's dtype; Python numbers and nested lists
    are converted to it (they carry no dtype of their own). A type numpy lacks (bf16, the
    f8s) may come as the plain void bytes ``np.savez``/``np.load`` turn it into (``|V2``)."""
    if isinstance(arg, np.ndarray) or isinstance(arg, np.generic):
        a = np.asarray(arg)
        if a.dtype.type is np.void and a.dtype.names is None and want.numpy_name is not None \
                and want.numpy.kind == "V" and a.dtype.itemsize == want.numpy.itemsize:
            a = a.view(want.numpy)
        try:
            et = from_numpy(a.dtype)
        except KeyError:
            raise HloArgumentError(f"{where} has numpy dtype {a.dtype}, which has no HLO type") from None
        return a, et, a.shape
    if isinstance(arg, (bool, int, float, list, tuple)):
        try:
            a = np.asarray(arg, dtype=want.numpy)
            if a.dtype.kind in "iu" and not isinstance(arg, bool):
                if np.any(np.asarray(arg) != a):
                    raise OverflowError
        except (OverflowError, ValueError, TypeError):
            raise HloArgumentError(f"{where}: {arg!r} cannot be converted to {want.name}") from None
        return a, want, a.shape
    if hasattr(arg, "__array__"):
        return _as_host_array(np.asarray(arg), want, where)
    raise HloArgumentError(f"{where} must be an array or a number, got {type(arg).__name__}")
