"""Warp shuffles for numba's CUDA simulator, which lacks them (``shfl_xor_sync``, ``syncwarp``):
enough for tests/device_steps.py to run streamtopics.refresh.gpu's warp kernels where there is no GPU.

The simulator runs each CUDA thread as a Python thread; here the 32 threads of a warp meet at a
barrier, each leaves its value in its lane's slot and reads its partner's, and meet again before
a slot can be overwritten. Every lane of a warp must call (streamtopics.refresh.gpu's kernels keep whole
warps together, as the hardware's full-mask shuffles require)."""

import threading

from numba.cuda.simulator.kernelapi import FakeCUDAModule

_lock = threading.Lock()
_warps: dict = {}


def _warp_state():
    thread = threading.current_thread()
    key = (id(thread._manager), tuple(thread.blockIdx), thread.thread_id // 32)
    with _lock:
        if key not in _warps:
            _warps[key] = (threading.Barrier(32), [None] * 32)
        return _warps[key], thread.thread_id % 32


def _shfl_xor_sync(self, mask, value, lane_mask):
    (barrier, slots), lane = _warp_state()
    slots[lane] = value
    barrier.wait()
    other = slots[lane ^ lane_mask]
    barrier.wait()
    return other


def _syncwarp(self, mask=0xFFFFFFFF):
    (barrier, _), _ = _warp_state()
    barrier.wait()


FakeCUDAModule.shfl_xor_sync = _shfl_xor_sync
FakeCUDAModule.syncwarp = _syncwarp
