"""How the verifier writes counts, sizes and lists of names in its lines."""

SHOWN = 4  # Names listed in a line; the rest are counted.

_ITEM_SIZES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
}


def count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def names(found: list[str]) -> str:
    more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
    return ", ".join(found[:SHOWN]) + more


def size(number: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(number) < 1024 or unit == "GB":
            return f"{number:.0f} {unit}" if unit == "B" else f"{number:.1f} {unit}"
        number /= 1024
    return f"{number:.1f} GB"


def variable_bytes(dtype: str, shape: str) -> int:
    """A variable's size from its dtype and shape as the observer writes them (a string's is unknown: 0)."""
    total = 1
    for dimension in shape.split("x") if shape != "scalar" else ():
        total *= int(dimension)
    return total * _ITEM_SIZES.get(dtype, 0)
