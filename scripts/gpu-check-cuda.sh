#!/usr/bin/env bash
# The GPU check for NVIDIA GPUs (docs/hardware.md, "CUDA"): on a machine with
# an NVIDIA GPU and its driver (libcuda.so.1), allocate device memory through
# the real driver, try its dma-buf export, register it (the software provider
# stages GPU memory: expected path Staged), GET and PUT through the software
# provider into and out of GPU memory, and check the bytes in GPU memory.
#
# Usage: scripts/gpu-check-cuda.sh [DEVICE]     (default device 0)
# Needs cargo (builds client/tests/gpu_real.rs), or HIPOBJ_GPU_TEST_BIN
# naming that test binary built elsewhere:
#   cargo test -p hipobj-client --test gpu_real --no-run   # prints its path
# Exit status: 0 the check passed, 1 it failed, 2 the machine cannot run it.
set -euo pipefail
cd "$(dirname "$0")/.."

device="${1:-0}"
echo "== GPU"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L || true
    nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader || true
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && [ -z "${HIPOBJ_CUDA_LIBRARY:-}" ]; then
    echo "no libcuda.so.1 (the NVIDIA driver's library): this machine cannot run the check"
    exit 2
fi
echo "== kernel modules (dma-buf export needs the open NVIDIA modules; plain MRs need nvidia_peermem)"
grep -E '^(nvidia|nvidia_peermem) ' /proc/modules | cut -d' ' -f1 || true
cat /proc/driver/nvidia/version 2>/dev/null | head -1 || true

export HIPOBJ_TEST_GPU=cuda
export HIPOBJ_TEST_GPU_DEVICE="$device"
export HIPOBJ_SOFT_TIMEOUT_SCALE="${HIPOBJ_SOFT_TIMEOUT_SCALE:-4}"
export RUST_LOG="${RUST_LOG:-hipobj=info}"
# A HIP runtime on the same machine would number its devices first.
export HIPOBJ_HIP_LIBRARY="${HIPOBJ_HIP_LIBRARY:-/nonexistent/libamdhip64.so}"

echo "== client/tests/gpu_real.rs on device $device"
if [ -n "${HIPOBJ_GPU_TEST_BIN:-}" ]; then
    exec "$HIPOBJ_GPU_TEST_BIN" --ignored --nocapture --test-threads=1
elif command -v cargo >/dev/null; then
    exec env CARGO_INCREMENTAL=0 cargo test -p hipobj-client --test gpu_real -- --ignored --nocapture --test-threads=1
else
    echo "needs cargo, or HIPOBJ_GPU_TEST_BIN naming a built gpu_real test binary"
    exit 2
fi
