#!/usr/bin/env bash
# System packages hlo-magic uses beyond pip, installed when this machine can (Debian/Ubuntu).
#
# - pocl-opencl-icd: PoCL 3.1 (LLVM 15). The pip dependency pocl-binary-distribution ships
#   PoCL 3.0 with LLVM 14, which cannot compile for CPUs newer than LLVM 14 knows (it fails
#   with "unknown target CPU 'generic'") and does not say which CPU it targets; PoCL 3.1
#   names its target (pthread-skylake-avx512, pthread-haswell) and is the default device
#   where it targets the host's vector ISA (runtime/device_probe.py has the rule).
# - oclgrind: an OpenCL simulator that presents itself as a GPU and checks every memory
#   access and data race; tests/gpu_sim runs the GPU strategy under it (and fails without it).
# - chromium, fonts-dejavu-core: the headless browser for the JupyterLab smoke test.
#
# Without root or apt-get it prints what to install and exits successfully: everything else
# still installs, and the runtime says clearly if no OpenCL device can compile.
set -u
packages="pocl-opencl-icd oclgrind chromium fonts-dejavu-core"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: no apt-get here; install PoCL (pocl-opencl-icd), oclgrind and chromium yourself if needed" >&2
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    run=""
elif command -v sudo >/dev/null 2>&1; then
    run="sudo"
else
    echo "system-deps: not root; run: sudo apt-get install -y $packages" >&2
    exit 0
fi
missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -z "$missing" ]; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$run apt-get update -qq && $run apt-get install -y -qq --no-install-recommends $missing >/dev/null \
    || echo "system-deps: could not install $missing (continuing)" >&2
exit 0
