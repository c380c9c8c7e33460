"""Tier 0: generic kernels built once per device, interpreting op programs, so that a module
runs before its specialised kernels are built (docs/architecture.md, "Tiered execution")."""
