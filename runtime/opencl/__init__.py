"""OpenCL platforms and devices, program builds and the on-disk caches of PoCL and of program
binaries: what code generation may ask of a device (its limits, its vector ISA) before any
executable exists."""
