"""The filter language (design.md §5): parsing, bounds, field catalog, compiling."""

from retrieval_svc.filters.compiler import compile_filter
from retrieval_svc.filters.fields import FieldCatalog, Kind
from retrieval_svc.filters.operators import Op
from retrieval_svc.filters.tree import FilterNode, parse_filter

__all__ = ["FieldCatalog", "FilterNode", "Kind", "Op", "compile_filter", "parse_filter"]
