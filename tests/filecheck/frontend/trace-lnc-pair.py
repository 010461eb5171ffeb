# RUN: %python %s | filecheck %s
# The LNC=2 pair: a kernel[2] launch traces one program region per core, each with its own concrete ranks; the
# sendrecv of gpsimd_dma carries GpSimd as its engine; core_barrier's cores are sorted.
import nkic

nkic.install_nki_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from nkic.frontend import TensorSpec  # noqa: E402


@nki.jit
def pair(a):
    pid = nl.program_id(0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[pid])
    got = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=t, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0,
                  dma_engine=nisa.dma_engine.gpsimd_dma)
    nisa.dma_copy(dst=out[pid], src=got)
    nisa.core_barrier(data=out, cores=(1, 0))
    return out


print(pair[2].trace(TensorSpec((2, 128, 64), "float32")).module)
# CHECK: penguin.kernel_node @pair(%a) {kind = "external", grid = 2 : i64}
# CHECK: penguin.kernel @pair : {{.*}} program {
# CHECK: penguin.sendrecv dst %{{.*}}[0 : [64, 128], [1, 64]], src %{{.*}}[0 : [64, 128], [1, 64]] {loc = "{{.*}}trace-lnc-pair.py:20:5", call = "nisa.sendrecv", send_to_rank = 1 : i64, recv_from_rank = 1 : i64, pipe_id = 0 : i64, gpsimd_dma = true, engine = "gpsimd"}
# CHECK: penguin.core_barrier data %{{.*}}[0 : [8192, 2], [64, 128], [1, 64]] {loc = "{{.*}}", cores = array<i64: 0, 1>, engine = "gpsimd"}
# CHECK: }, program {
# CHECK: penguin.sendrecv {{.*}} send_to_rank = 0 : i64, recv_from_rank = 0 : i64, pipe_id = 0 : i64, gpsimd_dma = true, engine = "gpsimd"}
# CHECK: penguin.core_barrier {{.*}} cores = array<i64: 0, 1>, engine = "gpsimd"}
