"""The op contract: what every op under test declares, once.

Modelled on PyTorch's OpInfo: one declarative record per op, validated when it is built,
so a bad description fails at import and not halfway through a run. The harness only ever
talks to an op through this record; nothing in `suite/` knows a particular op.

An implementation is called in destination-passing style:

    fn(**inputs, **attrs, out=outputs)

`inputs` are the op's tensors (None for absent optional ones), `attrs` its non-tensor
arguments, and `outputs` a dict of preallocated, NaN-poisoned tensors that the
implementation must overwrite completely. The harness owns allocation so that an element
the implementation never wrote is found by its poison bit pattern ("unwritten output").

An op may declare inputs that the implementation updates in place (`mutates`, an optimizer's
parameters and moments): each call gets copies holding the case's values (never poisoned:
they are read too), and after the call those copies are its outputs of the same name.
Inputs it may overwrite as scratch (`consumes`, an optimizer's gradients) are copied the
same way, and not checked afterwards. An input may be a list of tensors (a model's
parameter list), for multi-tensor implementations.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from bwd_suite.suite import values
from bwd_suite.suite.params import ParamSet


class TolClass(enum.Enum):
    """How an output is produced, which decides how much rounding error it may carry."""

    ELEMENTWISE = "elementwise"  # each element a short sum, rounded once to the output dtype
    REDUCTION = "reduction"  # sums over batch and time (dweight, dbias): order-dependent
    STATE = "state"  # carried state and its gradient across chunk boundaries


@dataclass(frozen=True)
class OutputSpec:
    name: str
    tol_class: TolClass
    # the terms each element sums (a reduction's length), where the op knows it: the fp32
    # summation error it allows grows with their square root (suite/tolerances.py); None:
    # the class's fixed allowance
    terms: Optional[int] = None


@dataclass(frozen=True)
class CaseInputs:
    """Tensors and attributes for one call, as built by the op's input factory."""

    tensors: Mapping[str, Optional[torch.Tensor]]
    attrs: Mapping[str, Any]

    def summary(self) -> str:
        """Shapes, dtypes and strides, never values."""
        parts = []
        for k, t in self.tensors.items():
            if t is None:
                continue
            if values.is_list(t):
                dts = sorted({str(x.dtype).removeprefix('torch.') for x in t})
                parts.append(f"{k}[{len(t)}: {' '.join(str(tuple(x.shape)) for x in t[:4])}"
                             f"{' ...' if len(t) > 4 else ''}]:{','.join(dts)}")
                continue
            parts.append(f"{k}{tuple(t.shape)}:{str(t.dtype).removeprefix('torch.')}"
                         f"@{tuple(t.stride())}")
        parts += [f"{k}={v!r}" for k, v in self.attrs.items()]
        return " ".join(parts)


# the tensors of one value, and a function over them: suite/values.py (older names)
tensor_list = values.tensors
map_tensors = values.map_tensors


# Allocator handed to `OpSpec.invoke`: (name, like-tensor spec) -> poisoned tensor.
Allocate = Callable[[Mapping[str, torch.Tensor]], dict]


def call_once(spec: "OpSpec", fn, inputs: CaseInputs, params: Mapping, allocate) -> dict:
    # the allocator sees the inputs: an output an implementation writes into an input's
    # storage (Implementation.in_place) is that input's tensor
    out = allocate(spec.empty_outputs(inputs, params), inputs)
    fn(**inputs.tensors, **inputs.attrs, out=out)
    return out


@dataclass(frozen=True)
class OpSpec:
    # --- metadata ---
    name: str  # op name, the folder name under cases/ and kernels/
    doc: str  # one line: what the backward computes

    # --- parameters and case validation ---
    params: ParamSet  # the case-file vocabulary
    # params -> (key, reason) for an impossible combination, or None
    check_case: Callable[[Mapping], Optional[tuple]]

    # --- inputs, truth and outputs ---
    # (params, seed, device) -> CaseInputs in the case dtype and memory layout
    make_inputs: Callable[[Mapping, int, torch.device], CaseInputs]
    # float64 closed-form backward: (tensors as float64, attrs) -> {output name: tensor}
    golden: Callable[..., dict]
    # params -> the outputs this case produces, each with its tolerance class
    outputs: Callable[[Mapping], Sequence[OutputSpec]]
    # (inputs, params) -> {output name: empty tensor with the required shape/dtype/layout}
    empty_outputs: Callable[[CaseInputs, Mapping], dict]

    # --- roofline ---
    bytes: Callable[[Mapping], int]  # compulsory traffic: inputs read once, outputs written once
    flops: Callable[[Mapping], int]

    # --- calling convention ---
    # (spec, fn, inputs, params, allocate) -> outputs, allocate(empties, inputs) giving each
    # call's `out`. Ops with chunked state override this to split one case into several
    # calls (through call_once); the default is one call.
    invoke: Callable[..., dict] = call_once
    # dtype of the case's activations, used to pick tolerances (a param name)
    dtype_param: str = "dtype"
    # the implementation whose same-dtype error sizes the tolerance (see suite/tolerances)
    yardstick: str = "torch_ref"
    # what the op's axes and features mean to the failure diagnosis: a
    # suite.diagnosis.DiagnosisSpec (regions, reference terms, features, causes, rules);
    # None: failing items get no localisation
    diagnosis: Optional[Any] = None

    # the golden under a second convention that correct kernels follow, where the truth
    # is ambiguous by a rounding that happened outside the backward (attention's D from
    # the saved, rounded o): (tensors as float64, attrs) -> {output name: tensor}. Each
    # output's conditioning is at least its distance to the golden / COND_FACTOR, so its
    # bound (and ceiling) widens by that distance. None: one convention
    alternate_golden: Optional[Callable[..., dict]] = None

    # params -> bytes of float64 temporaries the golden holds beyond its inputs and outputs
    # (attention's T x T scores of a head), for the memory estimate (suite/memory.py);
    # None: none worth counting
    golden_workspace: Optional[Callable[[Mapping], int]] = None

    # names of inputs the implementation updates in place (each also an output name):
    # every call gets copies holding the case's values, and the updated copies are checked
    # against the golden
    mutates: tuple = ()
    # names of inputs the implementation may overwrite as scratch (an optimizer's
    # gradients, which GradScaler unscales and clipping scales in place): every call gets
    # copies of the case's values, outside the timed region, and their values after the
    # call are not checked
    consumes: tuple = ()

    # statistics of one checked item, stored as JSON in the row's stats_json:
    # (params, the inputs as they were before the call, the implementation's outputs
    # including its updated inputs, the float64 golden) -> {name: number}; None: none
    case_stats: Optional[Callable[[Mapping, CaseInputs, Mapping, Mapping], dict]] = None

    # batch invariance (a check any op may declare): (inputs, params) -> (the same
    # sequences in another order, a function taking the outputs on those inputs back to the
    # original order), or None where the case has nothing to reorder (one sequence). An
    # implementation's outputs on both must be bitwise equal (`batch_invariant` column)
    batch_variant: Optional[Callable[[CaseInputs, Mapping], Optional[tuple]]] = None

    # analytic lower bounds of the backward's temporary memory: params -> {bound name:
    # bytes}, e.g. attention's {"materialised": ..., "fused": ...} (a backward that holds
    # the scores, one that recomputes them by blocks). Stored as JSON in the row's
    # memory_bounds_json (`memory_bounds_json` below) and set in the report's memory ledger
    # against the backward's peak (peak_mem_bytes) and what its forward saved
    # (saved_bytes); None: the op declares none
    memory_bounds: Optional[Callable[[Mapping], dict]] = None

    tags: tuple = field(default=())

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"op name {self.name!r} must be an identifier")
        if self.dtype_param not in self.params.by_name:
            raise ValueError(f"op {self.name}: dtype_param {self.dtype_param!r} is not a param")
        defaults = self.params.defaults()
        if not self.outputs(defaults):
            raise ValueError(f"op {self.name}: default params produce no outputs")
        for what in ("mutates", "consumes"):
            if not isinstance(getattr(self, what), tuple):
                raise ValueError(f"op {self.name}: {what} must be a tuple of input names")
        if set(self.mutates) & set(self.consumes):
            raise ValueError(f"op {self.name}: an input is in both mutates and consumes: "
                             f"{sorted(set(self.mutates) & set(self.consumes))}")
        if self.memory_bounds is not None and not callable(self.memory_bounds):
            raise ValueError(f"op {self.name}: memory_bounds must be a function of the "
                             f"params or None")

    @property
    def copied(self) -> tuple:
        """Inputs every call gets copies of: those it updates and those it consumes."""
        return self.mutates + self.consumes

    def call(self, fn, inputs: CaseInputs, params: Mapping, allocate) -> dict:
        return self.invoke(self, fn, inputs, params, allocate)

    def memory_bounds_json(self, params: Mapping) -> Optional[str]:
        """The case's memory bounds (`memory_bounds`) as a JSON object {name: bytes}; None
        where the op declares none. Never fatal, as case_stats: a hook that raises, or
        gives anything but a mapping of finite non-negative numbers, gives {"error":
        "..."}."""
        if self.memory_bounds is None:
            return None
        try:
            bounds = self.memory_bounds(params)
            if not isinstance(bounds, Mapping):
                raise TypeError(f"memory_bounds gave a {type(bounds).__name__}, not a mapping")
            kept = {}
            for name, value in bounds.items():
                value = value.item() if isinstance(value, torch.Tensor) else value
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or not math.isfinite(value) or value < 0:
                    raise ValueError(f"bound {name!r} is {value!r}, not a byte count")
                kept[str(name)] = value if isinstance(value, int) else float(value)
            return json.dumps(kept)
        except Exception as e:  # noqa: BLE001 - a bounds bug must not lose the item
            return json.dumps({"error": f"{type(e).__name__}: {e}"})
