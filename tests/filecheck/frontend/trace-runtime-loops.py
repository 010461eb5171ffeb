# RUN: %python %s | filecheck %s
# Traced penguin IR of a runtime loop: the bound is a register loaded from data; nl.dynamic_range becomes register
# instructions (r0 reads as zero, so a constant is r0 + imm) around one traced body between loop_begin/loop_end.
from nkic import api as nki

nl, nisa = nki.language, nki.isa


@nki.jit
def kernel(count, a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="out")
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    n = nisa.register_alloc()
    nisa.register_load(n, c)
    x = nl.load(a)
    for i in nl.dynamic_range(1, n, 2):
        nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=2.0)
    nl.store(out, value=x)
    return out


print(kernel.trace(nki.TensorSpec((1, 1), "int32"), nki.TensorSpec((128, 64), "float32")).module)

# CHECK: penguin.register_load src %{{.*}}[0 : [1, 1], [1, 1]] {{{.*}}dst_reg = 1 : i64}
# CHECK: penguin.register_alu {{{.*}}dst_reg = 2 : i64, op = "bypass", imm0 = 1 : i64}
# CHECK-NEXT: penguin.register_alu {{{.*}}dst_reg = 3 : i64, op = "bypass", src0_reg = 1 : i64}
# CHECK-NEXT: penguin.register_alu {{{.*}}dst_reg = 4 : i64, op = "less", src0_reg = 2 : i64, src1_reg = 3 : i64}
# CHECK-NEXT: penguin.loop_begin {{{.*}}cond_reg = 4 : i64}
# CHECK-NEXT: penguin.register_alu {{{.*}}dst_reg = 5 : i64, op = "bypass", src0_reg = 2 : i64}
# CHECK-NEXT: penguin.tensor_scalar dst
# CHECK-NEXT: penguin.register_alu {{{.*}}dst_reg = 2 : i64, op = "add", src0_reg = 2 : i64, imm1 = 2 : i64}
# CHECK-NEXT: penguin.register_alu {{{.*}}dst_reg = 4 : i64, op = "less", src0_reg = 2 : i64, src1_reg = 3 : i64}
# CHECK-NEXT: penguin.loop_end {{{.*}}cond_reg = 4 : i64}
# CHECK-NEXT: penguin.dma_copy dst %out
