"""HTTP routes: thin translation between HTTP and the modules that do the work."""
