"""A strict reader of Prometheus text exposition (format 0.0.4), for the metrics tests.

``prometheus_client`` is not installed; this reader checks what a scraper
relies on: ``# TYPE`` once per family and before its samples, metric and label
names, quoted and escaped label values, numeric values, no series twice, and
for histograms buckets in ascending ``le`` order ending in ``+Inf``, cumulative,
with ``_count`` equal to the ``+Inf`` bucket and a ``_sum``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}

Labels = tuple[tuple[str, str], ...]


class ExpositionError(ValueError):
    """The text is not valid Prometheus exposition format."""


@dataclass
class Exposition:
    types: dict[str, str] = field(default_factory=dict)
    samples: dict[tuple[str, Labels], float] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name`` with exactly ``labels`` (0 when absent, as a counter never incremented)."""
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def series(self, name: str) -> dict[Labels, float]:
        return {labels: v for (n, labels), v in self.samples.items() if n == name}


def _labels(text: str, line: str) -> Labels:
    out: dict[str, str] = {}
    i = 0
    while i < len(text):
        m = _LABEL_NAME.match(text, i)
        if m is None or text[m.end() : m.end() + 2] != '="':
            raise ExpositionError(f"bad label in {line!r}")
        name = m.group()
        i = m.end() + 2
        value = []
        while True:
            if i >= len(text):
                raise ExpositionError(f"unterminated label value in {line!r}")
            c = text[i]
            if c == "\\":
                nxt = text[i + 1 : i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ExpositionError(f"bad escape in {line!r}")
                value.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                value.append(c)
                i += 1
        if name in out:
            raise ExpositionError(f"label {name} twice in {line!r}")
        out[name] = "".join(value)
        if i < len(text):
            if text[i] != ",":
                raise ExpositionError(f"expected ',' in {line!r}")
            i += 1
    return tuple(sorted(out.items()))


def _family(name: str, types: dict[str, str]) -> str:
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and types.get(base) in ("histogram", "summary"):
            return base
    raise ExpositionError(f"sample {name} before (or without) its # TYPE line")


def parse(text: str) -> Exposition:
    """The samples of ``text``; raises ``ExpositionError`` on anything a strict scraper would refuse."""
    if not text.endswith("\n"):
        raise ExpositionError("the text must end with a newline")
    out = Exposition()
    seen_samples: set[str] = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE":
                name, kind = parts[2], parts[3] if len(parts) > 3 else ""
                if not _NAME.fullmatch(name) or kind not in _TYPES:
                    raise ExpositionError(f"bad TYPE line {line!r}")
                if name in out.types or name in seen_samples:
                    raise ExpositionError(f"TYPE of {name} twice or after its samples")
                out.types[name] = kind
            elif len(parts) >= 3 and parts[1] == "HELP" and not _NAME.fullmatch(parts[2]):
                raise ExpositionError(f"bad HELP line {line!r}")
            continue
        m = _NAME.match(line)
        if m is None:
            raise ExpositionError(f"bad sample line {line!r}")
        name, rest = m.group(), line[m.end() :]
        labels: Labels = ()
        if rest.startswith("{"):
            close = rest.rfind("}")
            if close < 0:
                raise ExpositionError(f"unclosed labels in {line!r}")
            labels = _labels(rest[1:close], line)
            rest = rest[close + 1 :]
        fields = rest.split()
        if not rest.startswith(" ") or len(fields) not in (1, 2):
            raise ExpositionError(f"bad value in {line!r}")
        try:
            value = float(fields[0])
        except ValueError:
            raise ExpositionError(f"bad value in {line!r}") from None
        family = _family(name, out.types)
        seen_samples.add(family)
        if (name, labels) in out.samples:
            raise ExpositionError(f"series {name}{dict(labels)} twice")
        out.samples[(name, labels)] = value
    for family, kind in out.types.items():
        if kind == "histogram":
            _check_histogram(out, family)
    return out


def _check_histogram(exp: Exposition, family: str) -> None:
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for labels, value in exp.series(family + "_bucket").items():
        le = dict(labels).get("le")
        if le is None:
            raise ExpositionError(f"{family}_bucket without le")
        rest = tuple((k, v) for k, v in labels if k != "le")
        groups.setdefault(rest, []).append((float(le), value))
    for rest, buckets in groups.items():
        buckets.sort()
        if not math.isinf(buckets[-1][0]):
            raise ExpositionError(f"{family}{dict(rest)} has no +Inf bucket")
        counts = [v for _, v in buckets]
        if counts != sorted(counts):
            raise ExpositionError(f"{family}{dict(rest)} buckets are not cumulative: {buckets}")
        if exp.samples.get((family + "_count", rest)) != counts[-1]:
            raise ExpositionError(f"{family}_count{dict(rest)} differs from its +Inf bucket")
        if (family + "_sum", rest) not in exp.samples:
            raise ExpositionError(f"{family}{dict(rest)} has no _sum")
