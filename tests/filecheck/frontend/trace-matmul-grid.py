# RUN: %python %s | filecheck %s
# The host graph calls the kernel node; a [2] grid gives one program region per SPMD program with a concrete
# program_id in its offsets; matmul keeps NKI's implicit accumulate (no attribute) inside a symbolic k loop.
from nkic.frontend import TensorSpec
from nkic.kernels.matmul import matmul
from nkic.kernels.tensor_add import tensor_add_spmd

print(matmul.trace(TensorSpec((256, 128), "bfloat16"), TensorSpec((256, 512), "bfloat16")).module)
# CHECK: penguin.graph @main {
# CHECK-NEXT: ^bb0(%lhsT: !penguin.tensor<shared_hbm, 256x128xbf16>, %rhs: !penguin.tensor<shared_hbm, 256x512xbf16>):
# CHECK-NEXT: %{{.*}} = penguin.kernel_node @matmul(%lhsT, %rhs) {kind = "external", grid = 1 : i64}
# The blocked kernel: operands come from the SBUF blocks ([128, k, cols] tiles), indexed by the k loop.
# CHECK: penguin.loop "affine" 0 to 2 step 1 {
# CHECK: penguin.matmul dst %{{.*}}[0 : [512, 128], [1, 512]], stationary %{{.*}}[{{.*}}128*i{{[0-9]+}} : [256, 128], [1, 128]], moving %{{.*}}[{{.*}}512*i{{[0-9]+}} : [1024, 128], [1, 512]] {loc = "{{.*}}matmul.py:{{[0-9]+}}{{.*}}"}

print(tensor_add_spmd[2].trace(TensorSpec((256, 512), "float32"), TensorSpec((256, 512), "float32")).module)
# CHECK: penguin.kernel_node @tensor_add_spmd(%a, %b) {kind = "external", grid = 2 : i64}
# CHECK: penguin.kernel @tensor_add_spmd : {{.*}} program {
# CHECK: src %a{{.*}}[0 + 65536*i0 + 512*i1 : [512, 128], [1, 512]]
# CHECK: }, program {
# CHECK: src %a{{.*}}[65536 + 65536*i0 + 512*i1 : [512, 128], [1, 512]]
