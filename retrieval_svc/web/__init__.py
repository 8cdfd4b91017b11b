"""Web search providers behind one interface (DESIGN §10)."""
