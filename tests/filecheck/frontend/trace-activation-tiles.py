# RUN: %python %s | filecheck %s
# Traced penguin IR of the derivative activations, prelu and fmod: nl.silu_dx is one ScalarE activation with that
# function; nl.prelu on gen4 is one activate2 with op prelu and the slope as relu_param; nl.fmod is VectorE abs/mod
# stages, the ScalarE sign of x and a multiply.
from nkic import api as nki

nl = nki.language


@nki.jit(platform_target="trn3")
def kernel(a, b):
    x = nl.load(a)
    y = nl.load(b)
    d = nl.silu_dx(x)
    p = nl.prelu(d, 0.125)
    r = nl.fmod(p, y)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    nl.store(out, value=r)
    return out


print(kernel.trace(nki.TensorSpec((128, 64), "float32"), nki.TensorSpec((128, 64), "float32")).module)

# CHECK: penguin.kernel @kernel
# CHECK: %[[X:.*]] = penguin.alloc "sbuf"
# CHECK: %[[Y:.*]] = penguin.alloc "sbuf_1"
# CHECK: %[[D:.*]] = penguin.alloc "sbuf_2"
# CHECK-NEXT: penguin.activation dst %[[D]]{{.*}}, data %[[X]]{{.*}}trace-activation-tiles.py:14{{.*}}func = "silu_dx"
# CHECK: %[[P:.*]] = penguin.alloc "sbuf_3"
# CHECK-NEXT: penguin.activate2 dst %[[P]]{{.*}}, data %[[D]]{{.*}}func = "prelu", op0 = "bypass", op1 = "bypass", {{.*}}relu_param = 1.250000e-01 : f32
# CHECK: %[[AY:.*]] = penguin.alloc "sbuf_4"
# CHECK-NEXT: penguin.tensor_scalar dst %[[AY]]{{.*}}, data %[[Y]]{{.*}}op0 = "abs"
# CHECK: %[[M:.*]] = penguin.alloc "sbuf_5"
# CHECK-NEXT: penguin.scalar_tensor_tensor dst %[[M]]{{.*}}, data %[[P]]{{.*}}, operand1 %[[AY]]{{.*}}op0 = "abs", {{.*}}op1 = "mod"
# CHECK: %[[S:.*]] = penguin.alloc "sbuf_6"
# CHECK-NEXT: penguin.activation dst %[[S]]{{.*}}, data %[[P]]{{.*}}func = "sign"
# CHECK: %[[R:.*]] = penguin.alloc "sbuf_7"
# CHECK-NEXT: penguin.tensor_tensor dst %[[R]]{{.*}}, data1 %[[M]]{{.*}}, data2 %[[S]]{{.*}}op = "multiply"
# CHECK: penguin.dma_copy dst %out{{.*}}, src %[[R]]
