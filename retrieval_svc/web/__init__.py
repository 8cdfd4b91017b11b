"""Web search providers behind one interface (design.md §10)."""
