# RUN: %python %s | filecheck %s
# Traced penguin IR of the legacy `psum += nisa.nc_matmul(...)` / `psum += nl.matmul(...)` idiom: the matmul
# accumulates into the PSUM accumulator itself (accumulate = true), as the PE array does on the device: no temporary
# PSUM tile, no copy to SBUF, no VectorE add. A matmul result kept in a variable stays a tile of its own (the add).
import warnings

import nkic

nkic.install_nki_alias()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

warnings.simplefilter("ignore")


@nki.jit
def kernel(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        acc += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
        acc += nl.matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]), transpose_x=True)
    nl.store(out, acc)
    return out


print(kernel.trace(nki.TensorSpec((256, 128), "float32"), nki.TensorSpec((256, 512), "float32")).module)

# CHECK: penguin.kernel @kernel
# CHECK: %[[ACC:.*]] = penguin.alloc "psum"
# CHECK-NEXT: penguin.memset dst %[[ACC]]
# CHECK: penguin.loop "affine" 0 to 2 step 1
# CHECK-NOT: penguin.alloc "psum
# CHECK: penguin.matmul dst %[[ACC]][0 : [512, 128], [1, 512]]{{.*}}call = "nisa.nc_matmul", accumulate = true}
# CHECK-NOT: penguin.alloc "psum
# CHECK: penguin.matmul dst %[[ACC]][0 : [512, 128], [1, 512]]{{.*}}call = "nl.matmul", accumulate = true}
# CHECK-NOT: penguin.tensor_tensor
# CHECK: } {loc


@nki.jit
def named(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    t = nisa.nc_matmul(nl.load(a[0:128, :]), nl.load(b[0:128, :]))
    acc += t
    nl.store(out, t)
    return out


print(named.trace(nki.TensorSpec((256, 128), "float32"), nki.TensorSpec((256, 512), "float32")).module)

# CHECK: penguin.kernel @named
# CHECK: %[[T:.*]] = penguin.alloc "psum_1"
# CHECK-NEXT: penguin.matmul dst %[[T]]
# CHECK-NOT: accumulate = true
# CHECK: penguin.tensor_tensor
# CHECK-SAME: op = "add"


# `acc[m] += ...` assigns the updated view back to itself (Python's __setitem__): that records nothing.
@nki.jit
def blocks(a, b):
    out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
    acc = nl.zeros((2, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    for m in nl.affine_range(2):
        for k in nl.affine_range(2):
            acc[m, :, :] += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128]),
                                           nl.load(b[k * 128:(k + 1) * 128, :]))
        nl.store(out[m], acc[m])
    return out


print(blocks.trace(nki.TensorSpec((256, 256), "float32"), nki.TensorSpec((256, 512), "float32")).module)

# CHECK: penguin.kernel @blocks
# CHECK: %[[ACC:.*]] = penguin.alloc "psum"
# CHECK: penguin.loop "affine" 0 to 2 step 1
# CHECK: penguin.matmul dst %[[ACC]][0 + 512*i0 : [1024, 128], [1, 512]]{{.*}}accumulate = true}
# CHECK-NEXT: } {loc
# CHECK-NEXT: penguin.alloc "sbuf
# CHECK-NEXT: penguin.tensor_copy {{.*}}call = "nl.store"
