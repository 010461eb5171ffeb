# RUN: %python %s | filecheck %s
# Traced penguin IR: affine_range stays a loop with a symbolic index (affine offsets), static_range unrolls,
# and a loop whose body needs the concrete index is re-traced unrolled.
from nkic import api as nki

nl, nisa = nki.language, nki.isa


@nki.jit
def kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    for i in nl.affine_range(4):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf, name="t")
        nisa.dma_copy(dst=t, src=a[i * 128 : (i + 1) * 128, 0:64])
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, 0:64], src=t)
    for j in nl.static_range(2):
        u = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf, name="u")
        nisa.memset(dst=u, value=float(j))
        nisa.dma_copy(dst=out[0:128, 64 + j * 64 : 128 + j * 64], src=u)
    for k in nl.affine_range(2):
        w = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf, name="w")
        nisa.memset(dst=w, value=1.0 if k == 0 else 2.0)  # needs the concrete k: this loop unrolls
        nisa.dma_copy(dst=out[128:256, 64 + k * 64 : 128 + k * 64], src=w)
    return out


print(kernel.trace(nki.TensorSpec((512, 192), "float32")).module)

# CHECK: penguin.kernel @kernel
# CHECK: penguin.loop "affine" 0 to 4 step 1 {
# CHECK-NEXT: %t = penguin.alloc "t" {{.*}}: !penguin.tensor<sbuf, 128x64xf32>
# CHECK-NEXT: penguin.dma_copy dst %t[0 : [64, 128], [1, 64]], src %a{{.*}}[0 + 24576*i0 : [192, 128], [1, 64]] {loc = "{{.*}}trace-loops.py:14{{.*}}"}
# CHECK-NEXT: penguin.dma_copy dst %out[0 + 24576*i0 : [192, 128], [1, 64]], src %t[0 : [64, 128], [1, 64]]
# CHECK-NEXT: }
# CHECK: penguin.memset dst %u{{.*}} {loc = "{{.*}}:18{{.*}}", value = 0.000000e+00 : f32, engine = "unknown"}
# CHECK: penguin.dma_copy dst %out[64 : [192, 128], [1, 64]]
# CHECK: penguin.memset dst %u{{.*}} {loc = "{{.*}}:18{{.*}}", value = 1.000000e+00 : f32, engine = "unknown"}
# CHECK: penguin.dma_copy dst %out[128 : [192, 128], [1, 64]]
# CHECK-NOT: penguin.loop
# CHECK: penguin.memset dst %w{{.*}} value = 1.000000e+00 : f32
# CHECK: penguin.dma_copy dst %out[24640 : [192, 128], [1, 64]]
# CHECK: penguin.memset dst %w{{.*}} value = 2.000000e+00 : f32
# CHECK: penguin.dma_copy dst %out[24704 : [192, 128], [1, 64]]
# CHECK: penguin.return %out
