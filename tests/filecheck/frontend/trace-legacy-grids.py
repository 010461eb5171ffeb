# RUN: %python %s | filecheck %s
# Traced penguin IR of a legacy (neuronxcc.nki) kernel with index grids and masks: nl.arange grids index HBM at a
# loop offset (the view's pattern comes from the grid coefficients: a stride-2 free dim), and mask= cuts every
# operand of the masked instruction to the box (i_p < 64) & (i_f < 100): 64 partitions, 100 elements.
import nkic

nkic.install_nki_alias()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


@nki.jit
def kernel(a):
    out = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(256)[None, :]
    for n in nl.affine_range(2):
        t = nl.load(a[n * 128 + i_p, 2 * i_f + 1])
        e = nl.exp(t, mask=(i_p < 64) & (i_f < 100))
        nl.store(out[i_p, i_f], value=e, mask=(i_p < 64) & (i_f < 100))
    return out


print(kernel.trace(nki.TensorSpec((256, 512), "float32")).module)

# CHECK: penguin.kernel @kernel
# CHECK: penguin.loop "affine" 0 to 2 step 1
# CHECK: %[[T:.*]] = penguin.alloc "sbuf"
# CHECK-NEXT: penguin.dma_copy dst %[[T]][0 : [256, 128], [1, 256]], src %{{.*}}[1 + 65536*i0 : [512, 128], [2, 256]]
# CHECK: %[[E:.*]] = penguin.alloc "sbuf_1"
# CHECK-NEXT: penguin.activation dst %[[E]][0 : [256, 64], [1, 100]], data %[[T]][0 : [256, 64], [1, 100]]{{.*}}trace-legacy-grids.py:20{{.*}}func = "exp"
# CHECK-NEXT: penguin.dma_copy dst %out[0 : [256, 64], [1, 100]], src %[[E]][0 : [256, 64], [1, 100]]{{.*}}trace-legacy-grids.py:21


# A condition over two axes (a causal triangle) predicates the write of dst: the activation goes to a temporary, a
# GpSimd iota computes i_p - i_f, a compare makes the (i_p - i_f >= 0) predicate, tensor_copy_predicated writes dst.
@nki.jit
def triangle(a):
    out = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    i_p, i_f = nl.mgrid[0:128, 0:128]
    t = nl.load(a[i_p, i_f])
    e = nl.exp(t, mask=(i_p >= i_f))
    nl.store(out, value=e)
    return out


print(triangle.trace(nki.TensorSpec((128, 128), "float32")).module)

# CHECK-LABEL: penguin.kernel @triangle
# CHECK: %[[E:.*]] = penguin.alloc "sbuf_1"
# CHECK: %[[TMP:.*]] = penguin.alloc "sbuf_2"
# CHECK-NEXT: penguin.activation dst %[[TMP]][0 : [128, 128], [1, 128]]
# CHECK: %[[V:.*]] = penguin.alloc "sbuf_3" {{.*}} : !penguin.tensor<sbuf, 128x128xi32>
# CHECK-NEXT: penguin.iota dst %[[V]]{{.*}}pattern = #nkic.ap<0 : [-1, 128]>, channel_multiplier = 1
# CHECK: %[[P:.*]] = penguin.alloc "sbuf_4" {{.*}} : !penguin.tensor<sbuf, 128x128xui8>
# CHECK-NEXT: penguin.tensor_scalar dst %[[P]]{{.*}}, data %[[V]]{{.*}}op0 = "greater_equal"
# CHECK-NEXT: penguin.tensor_copy_predicated dst %[[E]]{{.*}}, src %[[TMP]]{{.*}}, predicate %[[P]]
