# Type hints of the package einc (the implementation is in einc/_*.py).
from typing import Any, Callable, Optional, Sequence, Union

Tensor = Any  # anything with __dlpack__: numpy, torch, CuPy, JAX arrays
Shape = Sequence[int]

__version__: str

class EincError(RuntimeError, ValueError):
    code: str
    status: int
    message: str
    expr: Optional[str]
    span: Optional[tuple[int, int]]
    spans: list[tuple[int, int]]

EinError = EincError

def einsum(*tensors_and_expr: Union[Tensor, str], reduce: Optional[str] = ...,
           backend: str = ..., out: Optional[Tensor] = ...,
           numpy: Optional[bool] = ...,
           scales: Optional[Sequence[float]] = ...,
           out_dtype: Optional[Any] = ...,
           memory_limit: Union[int, str, None] = ...,
           **axis_sizes: int) -> Tensor: ...
def rearrange(tensor: Union[Tensor, Sequence[Tensor]], pattern: str,
              **axes_lengths: int) -> Tensor: ...
def reduce(tensor: Union[Tensor, Sequence[Tensor]], pattern: str,
           reduction: Union[str, Callable[[Tensor, tuple[int, ...]], Tensor]],
           **axes_lengths: int) -> Tensor: ...
def repeat(tensor: Union[Tensor, Sequence[Tensor]], pattern: str,
           **axes_lengths: int) -> Tensor: ...
def parse_shape(x: Tensor, pattern: str) -> dict[str, int]: ...
def pack(tensors: Sequence[Tensor], pattern: str
         ) -> tuple[Tensor, list[tuple[int, ...]]]: ...
def unpack(tensor: Tensor, packed_shapes: Sequence[Shape],
           pattern: str) -> list[Tensor]: ...
def check(expr: str, *shapes: Union[Shape, Tensor], reduce: Optional[str] = ...,
          numpy: Optional[bool] = ..., **axis_sizes: int) -> tuple[int, ...]: ...
def grad_program(expr: str, *shapes: Shape, wrt: int = ...,
                 reduce: Optional[str] = ..., numpy: Optional[bool] = ...,
                 dtype: str = ..., **lengths: int) -> dict[str, Any]: ...
def jvp_program(expr: str, *shapes: Shape, wrt: int = ...,
                reduce: Optional[str] = ..., numpy: Optional[bool] = ...,
                dtype: str = ..., **lengths: int) -> dict[str, Any]: ...
def backend_available(name: str = ..., device: int = ...) -> Optional[str]: ...

class Plan:
    expr: str
    shapes: tuple[tuple[int, ...], ...]
    flops: float
    naive_flops: float
    min_bytes: float
    output_shape: tuple[int, ...]
    largest_intermediate: int
    workspace_bytes: int
    is_view: bool
    model_flops: float
    memory: dict[str, Any]
    device: str
    peak: Optional[float]
    bandwidth: Optional[float]
    @property
    def grad_flops(self) -> float: ...
    @property
    def grad_bytes(self) -> float: ...
    def predicted_seconds(self, device: Optional[str] = ..., *,
                          peak: Optional[float] = ...,
                          bandwidth: Optional[float] = ...) -> float: ...
    def mfu(self, seconds: float, device: Optional[str] = ..., *,
            peak: Optional[float] = ...) -> float: ...
    def hfu(self, seconds: float, device: Optional[str] = ..., *,
            peak: Optional[float] = ...) -> float: ...
    def peak_flops(self, device: Optional[str] = ..., *,
                   peak: Optional[float] = ...) -> float: ...
    units: int
    memory_limit: int
    def __init__(self, expr: str, shapes: Any, *, dtype: Any = ...,
                 reduce: Optional[str] = ..., backend: str = ...,
                 numpy: Optional[bool] = ..., device: Optional[str] = ...,
                 path: Optional[str] = ..., peak: Optional[float] = ...,
                 bandwidth: Optional[float] = ..., slice: Optional[str] = ...,
                 memory_limit: Union[int, str, None] = ...,
                 plan_time: float = ...,
                 seed: int = ..., objective: str = ..., devices: int = ...,
                 **axis_sizes: int) -> None: ...
    def run_units(self, *tensors: Tensor, out: Tensor, first: int,
                  count: int = ...) -> Tensor: ...
    @property
    def path(self) -> list[tuple[int, ...]]: ...
    @property
    def ssa_path(self) -> list[tuple[int, ...]]: ...
    @property
    def steps(self) -> list[dict[str, Any]]: ...
    def to_dict(self) -> dict[str, Any]: ...
    def describe(self, device: Optional[str] = ..., *,
                 peak: Optional[float] = ...,
                 bandwidth: Optional[float] = ...) -> str: ...
    def __call__(self, *tensors: Tensor, out: Optional[Tensor] = ...) -> Tensor: ...

def plan(expr: str, *tensors_or_shapes: Union[Shape, Tensor], dtype: Any = ...,
         reduce: Optional[str] = ..., backend: str = ...,
         numpy: Optional[bool] = ..., device: Optional[str] = ...,
         peak: Optional[float] = ..., bandwidth: Optional[float] = ...,
         plan_time: float = ..., seed: int = ..., objective: str = ...,
         memory_limit: Union[int, str, None] = ...,
         **axis_sizes: int) -> Plan: ...
def compile(expr: str, *shapes: Union[Shape, Tensor], dtype: Any = ...,
            reduce: Optional[str] = ..., backend: str = ...,
            numpy: Optional[bool] = ..., plan_time: float = ...,
            seed: int = ..., objective: str = ...,
            memory_limit: Union[int, str, None] = ...,
            **axis_sizes: int) -> Plan: ...

class ShapeMemo:
    def __init__(self, **sizes: int) -> None: ...
    def check(self, spec: str, x: Union[Tensor, Shape],
              what: Optional[str] = ..., **sizes: int) -> Any: ...
    def __getitem__(self, name: str) -> int: ...
    def get(self, name: str, default: Any = ...) -> Any: ...
    def clear(self) -> None: ...
