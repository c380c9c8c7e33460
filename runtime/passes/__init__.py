"""Passes: functions from an HloModule to a new HloModule (the input is never mutated)."""
