"""Analyses of a module: call graph, dataflow and aliasing, schedules, live ranges."""
