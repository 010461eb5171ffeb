# RUN: %python %s | filecheck %s
# Traced penguin IR of an nl-style kernel: every value-returning tile function allocates its result and records
# the nisa instruction a hand-written kernel would use (load/store -> dma_copy, add -> tensor_tensor,
# exp -> activation on ScalarE, a number operand -> tensor_scalar, sum -> tensor_reduce).
from nkic import api as nki

nl = nki.language


@nki.jit
def kernel(a, b):
    x = nl.load(a)
    y = nl.load(b)
    z = nl.exp(nl.add(x, y))
    s = nl.sum(nl.multiply(z, 0.5), axis=1)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    nl.store(out, value=nl.subtract(z, s))
    return out


print(kernel.trace(nki.TensorSpec((128, 64), "float32"), nki.TensorSpec((128, 64), "float32")).module)

# CHECK: penguin.kernel @kernel
# CHECK: %[[X:.*]] = penguin.alloc "sbuf" {{.*}}: !penguin.tensor<sbuf, 128x64xf32>
# CHECK-NEXT: penguin.dma_copy dst %[[X]][0 : [64, 128], [1, 64]], src %a{{.*}} {loc = "{{.*}}trace-tiles.py:12{{.*}}"}
# CHECK: %[[Y:.*]] = penguin.alloc "sbuf_1"
# CHECK-NEXT: penguin.dma_copy dst %[[Y]]{{.*}}, src %b{{.*}}trace-tiles.py:13
# CHECK: %[[SUM:.*]] = penguin.alloc "sbuf_2"
# CHECK-NEXT: penguin.tensor_tensor dst %[[SUM]]{{.*}}, data1 %[[X]]{{.*}}, data2 %[[Y]]{{.*}}trace-tiles.py:14{{.*}}op = "add"
# CHECK: %[[E:.*]] = penguin.alloc "sbuf_3"
# CHECK-NEXT: penguin.activation dst %[[E]]{{.*}}, data %[[SUM]]{{.*}}trace-tiles.py:14{{.*}}func = "exp"
# CHECK: %[[H:.*]] = penguin.alloc "sbuf_4"
# CHECK-NEXT: penguin.tensor_scalar dst %[[H]]{{.*}}, data %[[E]]{{.*}}op0 = "multiply", operand0 = 5.000000e-01
# CHECK: %[[S:.*]] = penguin.alloc "sbuf_5" {{.*}}: !penguin.tensor<sbuf, 128x1xf32>
# CHECK-NEXT: penguin.tensor_reduce dst %[[S]]{{.*}}, data %[[H]]{{.*}}trace-tiles.py:15{{.*}}op = "add", axes = array<i64: 1>
# CHECK: %[[D:.*]] = penguin.alloc "sbuf_6"
# CHECK-NEXT: penguin.tensor_scalar dst %[[D]]{{.*}}, data %[[E]]{{.*}}, operand0 %[[S]]{{.*}}op0 = "subtract"
# CHECK: penguin.dma_copy dst %out{{.*}}, src %[[D]]{{.*}}trace-tiles.py:17
# CHECK: penguin.return %out
