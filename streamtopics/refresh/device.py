"""Where the refinement runs: whether there is a CUDA device, and the choice ``refine_device`` makes.

Kept apart from :mod:`~streamtopics.refresh.gpu` (the device refinement itself) so that the settings
(:mod:`~streamtopics.config`) and the refresh can ask about the device without importing the
kernels: the dependencies run one way, config -> device <- gpu. numba's CUDA module is imported
only when a device is asked about.
"""
from __future__ import annotations

#: ``refine_device="cuda"``: the most columns (topics and the background) a GPU thread's local
#: arrays hold (:mod:`~streamtopics.refresh.gpu_kernels`); more topics refine on the CPU.
DEVICE_MAX_COLUMNS = 512


def cuda_available() -> bool:
    """Whether numba sees a usable CUDA device."""
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # a broken driver or toolkit counts as no device
        return False


def device_name() -> str:
    """The current CUDA device's name (numba's simulator has none)."""
    from numba import cuda

    try:
        name = cuda.get_current_device().name
    except AttributeError:
        return "numba's CUDA simulator"
    return name.decode() if isinstance(name, bytes) else str(name)


def refinement_device(setting: str, n_columns: int) -> str:
    """``"cpu"`` or ``"cuda"`` for a refinement of ``n_columns`` columns under the
    ``refine_device`` ``setting`` ("cpu", "cuda" or "auto"); ``"cuda"`` without a device raises
    RuntimeError, "auto" falls back on the CPU without one or beyond :data:`DEVICE_MAX_COLUMNS`."""
    if setting == "cpu":
        return "cpu"
    found = cuda_available()
    if setting == "cuda" and not found:
        raise RuntimeError("refine_device='cuda', but numba finds no CUDA device ('auto' falls back on the CPU)")
    return "cuda" if found and n_columns <= DEVICE_MAX_COLUMNS else "cpu"
