"""Software prefetch for the kernels' scattered reads.

The refinement's and the ingest's hot loops read rows of large matrices at addresses known a
few steps ahead (a document's words, a word's documents): each row is a cache miss that the
loop would otherwise wait for. :func:`prefetch` asks the CPU to start loading an address and
returns at once; :func:`prefetch_row` covers a whole row, one request per 64-byte cache line.
Neither changes any result.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

CACHE_LINE = 64  # bytes
ROWS_AHEAD = 2  # rows prefetched ahead of the one being read (`git show 8e056d1:BENCHMARKS.md`, "CVB0 in blocks,
# and prefetched rows")


@intrinsic
def prefetch(typingctx, array, index):
    """Ask the CPU to start loading ``array[index]`` into cache (LLVM's ``llvm.prefetch``: no
    fault for an index out of bounds, nothing waits for it). ``array`` is one-dimensional."""
    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, [args[1]],
                                           wraparound=False, boundscheck=False)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(  # the typed-pointer name: LLVM >= 15 remangles it
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0i8")
        builder.call(function, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()
    return types.void(array, index), codegen


@njit(cache=True, nogil=True, inline="always")
def prefetch_row(flat, row, width):
    """Prefetch row ``row`` of a C-contiguous matrix of ``width`` columns, given as ``flat``
    (its ``reshape(-1)``)."""
    start = row * width
    step = max(CACHE_LINE // flat.itemsize, 1)
    for offset in range(0, width, step):
        prefetch(flat, start + offset)
